#!/usr/bin/env python3
"""report.html and compare.html under a real parser: `fp8-advisor run` on a capture (or `compare`
on two), then the page parsed by lxml's strict XML parser (the page is well-formed XHTML-compatible
HTML5) and checked: its sections, every <svg> with a title, axis titles and a legend, every link an
anchor of the page, ids unique, no script, no event handler, nothing referring outside the file
(http, //, file:, url() other than url(#...), @import). For compare.html also: the ranked table's
first row, highlighted, is compare.csv's rank 1.

usage: check_html.py FP8_ADVISOR CAPTURE_DIR [EXTRA RUN ARGS...]
       check_html.py FP8_ADVISOR --compare BASE CAND [EXTRA COMPARE ARGS...]
Exit 0 and one "OK: ..." line; 1 and "FAIL: ..." lines; 77 when lxml is missing (Debian's
python3-lxml, scripts/install-deps.sh installs it)."""
import re
import subprocess
import sys
import tempfile

try:
    from lxml import etree, html as lxml_html
except ImportError:
    print("SKIP: python3-lxml is not installed (apt-get install python3-lxml)")
    sys.exit(77)

EXTERNAL = re.compile(r"^\s*(https?:|//|file:|ftp:|data:)", re.IGNORECASE)
URL_FN = re.compile(r"url\(\s*([^)]*)\)", re.IGNORECASE)


def local(tag):
    return tag.split("}")[-1] if isinstance(tag, str) else ""


RUN_SECTIONS = ("summary", "heatmaps", "layers")
COMPARE_SECTIONS = ("inputs", "ranking", "heatmaps", "distribution", "one-side")


def check(path, sections):
    failures = []
    raw = open(path, "rb").read()
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)
    root = etree.fromstring(raw, parser)  # raises on anything not well-formed
    lxml_html.document_fromstring(raw)    # and an HTML parser reads it too
    text = raw.decode("utf-8")
    if not text.startswith("<!DOCTYPE html>"):
        failures.append("no <!DOCTYPE html> first")
    if re.search(r"https?://|file:", text, re.IGNORECASE):
        failures.append("a URL (http/https/file) somewhere in the page")
    ids, hrefs = {}, []
    for el in root.iter():
        tag = local(el.tag)
        if tag in ("script", "iframe", "object", "embed", "link", "img", "image", "use", "foreignObject"):
            failures.append(f"<{tag}> element")
        if tag == "style" and ("@import" in (el.text or "") or "url(" in (el.text or "")):
            failures.append("@import or url() in <style>")
        for name, value in el.attrib.items():
            n = local(name)
            if n.lower().startswith("on"):
                failures.append(f"event handler {n} on <{tag}>")
            if n in ("href", "src", "action", "poster", "data"):
                if EXTERNAL.match(value) or not value.startswith("#"):
                    failures.append(f"{n}={value!r} on <{tag}> is not an anchor of the page")
                else:
                    hrefs.append(value[1:])
            for u in URL_FN.findall(value):
                if not u.strip("'\" ").startswith("#"):
                    failures.append(f"url({u}) in {n} of <{tag}>")
            if n == "id":
                if value in ids:
                    failures.append(f"id {value!r} twice")
                ids[value] = el
    for h in hrefs:
        if h not in ids:
            failures.append(f"link to #{h}: no such id")
    for section in sections:
        if section not in ids:
            failures.append(f"no section #{section}")
    svgs = [el for el in root.iter() if local(el.tag) == "svg"]
    if not svgs:
        failures.append("no <svg>")
    for i, s in enumerate(svgs):
        name = s.get("aria-label") or f"svg #{i}"
        texts = [t for t in s.iter() if local(t.tag) == "text"]
        if not any(local(t.tag) == "title" and (t.text or "").strip() for t in s):
            failures.append(f"{name}: no <title>")
        titles = [t for t in texts if t.get("class") == "axis-title" and (t.text or "").strip()]
        if len(titles) < 2:
            failures.append(f"{name}: {len(titles)} axis titles")
        if not any(g.get("class") == "legend" for g in s.iter() if local(g.tag) == "g"):
            failures.append(f"{name}: no legend")
        if sum(1 for t in texts if (t.text or "").strip()) < 4:
            failures.append(f"{name}: fewer than 4 text labels")
    cards = [el for el in root.iter() if el.get("class") == "card"]
    for c in cards:
        if c.get("id") not in hrefs:
            failures.append(f"card {c.get('id')} is linked from nowhere")
    return failures, len(svgs), len(cards), len(raw), root


def check_compare_top(root, csv_path):
    """The ranking's first body row: class "top", and compare.csv's rank 1 (layer, tensor, recipe)."""
    import csv
    with open(csv_path, newline="") as f:
        first = next(csv.DictReader(f))
    section = next(el for el in root.iter() if el.get("id") == "ranking")
    rows = [el for el in section.iter() if local(el.tag) == "tr" and el.getparent() is not None
            and local(el.getparent().tag) == "tbody"]
    if not rows:
        return ["the ranking has no rows"]
    cells = ["".join(td.itertext()) for td in rows[0] if local(td.tag) == "td"]
    failures = []
    if rows[0].get("class") != "top":
        failures.append("the ranking's first row is not highlighted")
    if cells[:2] != ["1", first["change"]] or [cells[4], cells[5], cells[6]] != [first["layer"], first["tensor"],
                                                                               first["recipe"]]:
        failures.append(f"the ranking's first row {cells[:7]} is not compare.csv's rank 1 {first}")
    return failures


def main():
    if len(sys.argv) < 3 or (sys.argv[2] == "--compare" and len(sys.argv) < 5):
        print(__doc__)
        return 2
    binary = sys.argv[1]
    compare = sys.argv[2] == "--compare"
    page = "compare.html" if compare else "report.html"
    with tempfile.TemporaryDirectory() as out:
        if compare:
            cmd = [binary, "compare", sys.argv[3], sys.argv[4], "--out", out, "--quiet", *sys.argv[5:]]
        else:
            cmd = [binary, "run", "--capture", sys.argv[2], "--out", out, "--quiet", *sys.argv[3:]]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL: {' '.join(cmd)} exited {run.returncode}: {run.stderr.strip()}")
            return 1
        try:
            failures, svgs, cards, size, root = check(out + "/" + page, COMPARE_SECTIONS if compare else RUN_SECTIONS)
        except etree.XMLSyntaxError as e:
            print(f"FAIL: {page} is not well-formed: {e}")
            return 1
        if compare:
            failures += check_compare_top(root, out + "/compare.csv")
    for f in failures:
        print("FAIL: " + f)
    if failures:
        return 1
    what = f"{svgs} svg" + ("" if compare else f", {cards} layer cards")
    print(f"OK: {page} well-formed ({size} bytes, {what}), self-contained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
