#!/usr/bin/env python3
"""check_torchao.py FILE: a torchao.json builds torchao's float8 training config and filter.

FILE: {"recipe_name": a torchao Float8LinearRecipeName value, or null with "reason" saying why
none fits; "filter_fqns": module FQNs to keep in high precision, each matching the module of that FQN or
one whose FQN ends in "." + it, as torchao.json's reason spells the module_filter_fn (not
torchtitan's substring match: "proj" would also match "out_proj"); optionally "modules": every Linear's FQN}. No other key.
Builds Float8LinearConfig.from_recipe_name (torchao asserts on an unknown name) with emulate=True
(the CPU), then a model of nn.Linear at those FQNs (at the filter_fqns when "modules" is
absent) and runs torchao's convert_to_float8_training with the filter: the modules each entry
matches stay nn.Linear, the others become Float8Linear, and an entry that matches no module fails
(it would keep nothing in high precision)."""
import dataclasses
import os
import sys

from _common import CheckFailed, main, read_json

KEYS = {"recipe_name", "filter_fqns", "modules", "reason"}


def _strings(doc, key):
    v = doc.get(key, [])
    if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v):
        raise CheckFailed("%s must be a list of non-empty strings" % key)
    return v


def build_model(torch, fqns):
    root = torch.nn.Module()
    for fqn in fqns:
        parent = root
        parts = fqn.split(".")
        for p in parts[:-1]:
            if not hasattr(parent, p):
                parent.add_module(p, torch.nn.Module())
            parent = getattr(parent, p)
        if hasattr(parent, parts[-1]):
            raise CheckFailed("module %r is listed twice or inside another module" % fqn)
        parent.add_module(parts[-1], torch.nn.Linear(32, 32, bias=False))
    return root


def check(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    doc = read_json(argv[0])
    if not isinstance(doc, dict):
        raise CheckFailed("%s: not a JSON object" % argv[0])
    unknown = sorted(set(doc) - KEYS)
    if unknown:
        raise CheckFailed("unknown key %r (expected %s)" % (unknown[0], ", ".join(sorted(KEYS))))
    filter_fqns, modules = _strings(doc, "filter_fqns"), _strings(doc, "modules")
    name = doc.get("recipe_name")
    if name is None:
        if not (isinstance(doc.get("reason"), str) and doc["reason"].strip()):
            raise CheckFailed("recipe_name is null without a reason")
        return "%s: no torchao recipe (%s)" % (os.path.basename(argv[0]), doc["reason"])
    import torch
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    from torchao.float8.float8_linear import Float8Linear
    config = dataclasses.replace(Float8LinearConfig.from_recipe_name(name), emulate=True)
    fqns = modules or list(filter_fqns) + ["fp8a_check_unfiltered"]
    model = build_model(torch, fqns)
    def selects(f, fqn):
        return fqn == f or fqn.endswith("." + f)

    keep = lambda mod, fqn: not any(selects(f, fqn) for f in filter_fqns)  # noqa: E731
    convert_to_float8_training(model, module_filter_fn=keep, config=config)
    converted = {n for n, m in model.named_modules() if isinstance(m, Float8Linear)}
    for f in filter_fqns:
        if not any(selects(f, fqn) for fqn in fqns):
            raise CheckFailed("filter_fqns entry %r matches no module" % f)
    for fqn in fqns:
        if (fqn in converted) == any(selects(f, fqn) for f in filter_fqns):
            raise CheckFailed("%s: %s by torchao, against the filter" % (
                fqn, "converted" if fqn in converted else "not converted"))
    return "%s: torchao recipe %s, %d modules kept high precision, %d converted" % (
        os.path.basename(argv[0]), name, len(fqns) - len(converted), len(converted))


if __name__ == "__main__":
    sys.exit(main(check))
