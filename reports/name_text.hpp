// A layer name (bytes from someone else's capture: any byte, any length up to
// core/text.hpp kMaxNameBytes) in each output format, so that no name can add a key, end a
// comment, run markup or break a reader. One function per format; the forms are listed in
// docs/SECURITY.md.
#pragma once

#include <string>
#include <string_view>

namespace fp8a {

// A Python `re` pattern (nvdlfw_inspect's layer_name_regex_pattern, re.search) matching `name`
// or any name that ends in "." + `name` (whatever wraps the model: model.module.module.<name>):
// (^|\.)...$, the metacharacters .^$*+?()[]{}| and \ escaped with \, ASCII controls as \xNN,
// the characters core/text.hpp is_layout_control lists as \uNNNN, a byte outside UTF-8 as \xNN
// (a Python name is text, so such a name matches nothing in the model either way). Every other
// character is kept, so the pattern is printable text a YAML scalar carries as it is.
// `any_dot`: each '_' of `name` may stand for a '.' (a TE dump's name, core/layer_name.hpp
// is_te_dump_name) and is written [._].
std::string python_suffix_regex(std::string_view name, bool any_dot = false);

// An fnmatch glob (Megatron's te_precision_config `type: glob`) matching `name` and nothing else:
// * ? [ as [*] [?] [[], every other character kept (controls, line breaks and the characters
// is_layout_control lists included: the writer puts the pattern in a double-quoted scalar with
// every non-ASCII character and control escaped), a byte outside UTF-8 as U+FFFD (a Python name
// is text, so such a name matches nothing in the model either way, and no other name).
// `any_dot`: each '_' of `name` may stand for a '.' and is written ? (one character, '.' or '_').
std::string fnmatch_exact_glob(std::string_view name, bool any_dot = false);

// A YAML key made from a name: ASCII letters, digits, _ and - kept, every other byte _; keys that
// turn out equal are told apart by the writer (a _2 suffix).
std::string yaml_key_text(std::string_view name);

// Markdown text (report.md, compare.md) showing `text` as it is: core/text.hpp visible_text's
// escapes for control bytes and bytes outside UTF-8, except that a line break (\n, \r\n, \r)
// becomes <br>; then \ ` * [ ] | ~ escaped with \, _ escaped unless between two ASCII letters or
// digits (where CommonMark never reads it as emphasis), a leading # > - + = escaped, < & as &lt;
// &amp;. No raw HTML, link, emphasis, block or table cell boundary can come from the text.
// starts_block false (a table cell, whose content is inline only): the leading marker is kept.
std::string markdown_text(std::string_view text, bool starts_block = true);
// `text` as a Markdown code span: visible_text's escapes inside, a fence of one more backtick
// than the longest run in it, | as \| (GFM splits table cells on it even in code).
std::string markdown_code(std::string_view text);

}  // namespace fp8a
