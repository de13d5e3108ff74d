#!/usr/bin/env python3
"""report.html in a real browser: headless Chromium (Debian's `chromium`) renders the pages that
`fp8-advisor run` writes, to PNG, and the screenshots are checked:

- every page loads with no console message (the page has no script, so any is an error: a blocked
  or failed load, a CSP or parser complaint) and no network request from the page at all (the
  resolver maps every host to NOTFOUND, and Chromium's net log is read for requests the page made);
- the page is not blank: a share of non-background pixels, many distinct colours, colour pixels;
- the first screen (1400 x 900) of the sample's report holds the whole answer box and the plan
  grid (each found by rendering the page with everything else hidden);
- a 17-layer report prints (--print-to-pdf) to at most 30 pages;
- the first heatmap's pixels change with the data (on copies with the folded sections opened): the synth preset `outlier-growth` captured at
  steps 1,2 (outliers small) and at 99,100 (outliers 20x larger) gives two reports with the same
  layers and candidates; the heatmap's box is found by rendering each page with everything but
  that <svg> hidden (visibility keeps the layout), and inside it the two screenshots must differ
  in colour pixels, while the same page rendered twice is identical there.
The detectors are checked first on a planted page (a console error and an external image).

usage: render_check.py FP8_ADVISOR REPO_ROOT [--keep DIR]     the test (ctest test_report_render)
       render_check.py --page FILE.html [--keep DIR]          one page: loads clean, not blank
--keep DIR keeps the screenshots and heatmap crops there. Exit 0 and one "OK: ..." line; 1 and
"FAIL: ..." lines; 77 when chromium is not installed (scripts/install-deps.sh installs it).
FP8A_CHROMIUM names another browser binary."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pngio  # noqa: E402

WINDOW = (1280, 3600)
RENDER_TIMEOUT_S = 60
RUN_TIMEOUT_S = 120
# Quiet, offline, deterministic: no GPU, no sandbox (CI runs as root), no first-run or background
# fetches of Chromium's own, every host unresolvable.
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1",
    "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
    "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
    "--disable-features=Translate,MediaRouter,OptimizationHints,SpellCheck", "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
]
# What Chromium logs for a page's console messages and failed loads (INFO:CONSOLE carries the
# console.* level nowhere in this version, so every console line counts).
CONSOLE = re.compile(r":CONSOLE[:(\]]|Uncaught|Failed to load resource|Not allowed to load local resource|Refused to ")
# A non-white pixel: any channel below this.
INK = 245
# Not blank: this share of the viewport not background, this many distinct colours (6-bit
# channels), this many colour (not grey) pixels. The sample's page has ~10 %, ~1000 and ~60000.
MIN_INK_SHARE = 0.03
MIN_COLOURS = 50
MIN_CHROMA_PIXELS = 2000
CHROMA = 40  # max - min channel above this: a colour pixel (viridis cells), not text or grey lines
# The heatmaps of the two runs must differ in this share of the heatmap's box, in colour pixels.
MIN_HEATMAP_CHANGE = 0.02


class Failure(Exception):
    pass


def find_chromium():
    """The browser, None when not installed; FP8A_CHROMIUM naming no program is an error."""
    named = os.environ.get("FP8A_CHROMIUM")
    if named:
        path = shutil.which(named)
        if path is None:
            raise SystemExit(f"FAIL: FP8A_CHROMIUM={named} is not a program")
        return path
    return shutil.which("chromium")


def run_bounded(cmd, timeout, **kw):
    """cmd in its own process group, killed whole (renderer and GPU processes too) on timeout."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise Failure(f"{os.path.basename(cmd[0])} ran over {timeout} s, killed: {' '.join(cmd[1:4])} ...")
    finally:
        try:  # a browser leaves no child behind either way
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


class Render:
    def __init__(self, png, console, requests, seconds):
        self.png, self.console, self.requests, self.seconds = png, console, requests, seconds
        self.image = pngio.decode_file(png)


def page_requests(netlog_path):
    """URLs the page asked the network stack for: requests with an initiator (the page's opaque
    file origin is 'null'), or isolated under file://; Chromium's own background requests have
    'not an origin' and go to NOTFOUND anyway."""
    try:
        with open(netlog_path) as f:
            log = json.load(f)
    except (OSError, ValueError) as e:  # a net log cut short by exit: read what parses
        text = open(netlog_path).read() if os.path.exists(netlog_path) else ""
        try:
            log = json.loads(text.rstrip().rstrip(",") + "]}")
        except ValueError:
            raise Failure(f"Chromium's net log unreadable: {e}")
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    urls = []
    for e in log.get("events", []):
        p = e.get("params") or {}
        if names.get(e.get("type")) != "URL_REQUEST_START_JOB" or "url" not in p:
            continue
        if p.get("initiator", "not an origin") != "not an origin" or "file://" in p.get("network_isolation_key", ""):
            urls.append(p["url"])
    return urls


def render(chromium, html, png, work, window=WINDOW):
    """html (a file) to png at window; the console lines and the page's network requests."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=work)
    netlog = png + ".netlog.json"
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={window[0]},{window[1]}",
           f"--log-net-log={netlog}", f"--screenshot={png}", "file://" + os.path.abspath(html)]
    t0 = time.monotonic()
    rc, out, err = run_bounded(cmd, RENDER_TIMEOUT_S, env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS="disabled:"))
    seconds = time.monotonic() - t0
    shutil.rmtree(profile, ignore_errors=True)
    if rc != 0 or not os.path.exists(png):
        tail = "\n".join((out + err).strip().splitlines()[-8:])
        raise Failure(f"chromium exit {rc} on {html}, no screenshot:\n{tail}")
    console = [line for line in (out + err).splitlines() if CONSOLE.search(line)]
    return Render(png, console, page_requests(netlog), seconds)


def ink_stats(img):
    """(share of non-white pixels, distinct colours at 6 bits a channel, colour pixels)."""
    ink = chroma = 0
    colours = set()
    white = b"\xff" * (img.width * img.channels)
    for y in range(img.height):
        if img.rows[y] == white:
            continue
        for r, g, b in img.rgb_row(y):
            if r < INK or g < INK or b < INK:
                ink += 1
                colours.add((r >> 2, g >> 2, b >> 2))
                if max(r, g, b) - min(r, g, b) > CHROMA:
                    chroma += 1
    return ink / (img.width * img.height), len(colours), chroma


def check_loads_clean(name, r, failures):
    for line in r.console:
        failures.append(f"{name}: console: {line.strip()[:300]}")
    for url in r.requests:
        failures.append(f"{name}: the page requested {url}")


def check_not_blank(name, r, failures):
    img = r.image
    if (img.width, img.height) != WINDOW:
        failures.append(f"{name}: screenshot {img.width}x{img.height}, expected {WINDOW[0]}x{WINDOW[1]}")
    share, colours, chroma = ink_stats(img)
    if share < MIN_INK_SHARE or colours < MIN_COLOURS or chroma < MIN_CHROMA_PIXELS:
        failures.append(f"{name}: looks blank: {share:.1%} non-white (min {MIN_INK_SHARE:.0%}), {colours} colours "
                        f"(min {MIN_COLOURS}), {chroma} colour pixels (min {MIN_CHROMA_PIXELS})")
    return share, colours, chroma


def first_heatmap(html_text):
    """(name, start of its <svg tag): the first <svg> holding a heatmap (its pattern ids are
    hm-ROLE-ORIENTATION-METRIC-...); the name is that id's stem."""
    for m in re.finditer(r"<svg\b", html_text):
        end = html_text.find("</svg>", m.start())
        hm = re.search(r'id="(hm-[a-z]+-[a-z]+-[a-z]+)-', html_text[m.start():end])
        if hm:
            return hm.group(1), m.start()
    raise Failure("no heatmap (an <svg> with hm-* ids) in the page")


def unfolded(html, work):
    """A copy of the page with every folded <details> open (the heatmaps and the layer cards'
    evidence are folded under the plan); its path."""
    text = open(html, encoding="utf-8").read()
    path = os.path.join(work, os.path.basename(os.path.dirname(html)) + "-open.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace('<details class="fold">', '<details class="fold" open>'))
    return path


def heatmap_box(chromium, html, work):
    """The box (x0, y0, x1, y1) the first heatmap's <svg> covers on the page: the page rendered
    with everything else visibility:hidden (same layout), the bounding box of what is left."""
    text = open(html, encoding="utf-8").read()
    _, at = first_heatmap(text)
    return element_box(chromium, html, work, text, at, "<svg", "heatmap", WINDOW)


def element_box(chromium, html, work, text, at, tag, what, window):
    """The box the element whose start tag `tag` begins at `at` in `text` (the page of `html`)
    covers when rendered at `window`, everything else visibility:hidden."""
    target = "fp8a-render-target"
    mask = (f"<style>body * {{ visibility: hidden !important; }} "
            f"#{target}, #{target} * {{ visibility: visible !important; }}</style>")
    if "</head>" not in text[:at]:
        raise Failure(f"{html}: no </head> before the {what}")
    text = text[:at] + f'{tag} id="{target}"' + text[at + len(tag):]
    masked = os.path.join(work, os.path.basename(os.path.dirname(html)) + "-" + what.replace(" ", "-") + "-mask.html")
    with open(masked, "w", encoding="utf-8") as f:
        f.write(text.replace("</head>", mask + "</head>", 1))
    r = render(chromium, masked, masked[:-5] + ".png", work, window)
    img = r.image
    bg = img.rgb(img.width - 1, 0)
    bg_row = img.rows[0]
    xs, ys = [], []
    for y in range(img.height):
        if img.rows[y] == bg_row and bg_row.count(bg_row[:img.channels]) == img.width:
            continue
        row = img.rgb_row(y)
        hits = [x for x, p in enumerate(row) if max(abs(p[0] - bg[0]), abs(p[1] - bg[1]), abs(p[2] - bg[2])) > 8]
        if hits:
            ys.append(y)
            xs += (hits[0], hits[-1])
    if not ys:
        raise Failure(f"{html}: the {what} is not drawn in the top {img.height} px")
    box = (min(xs), ys[0], max(xs) + 1, ys[-1] + 1)
    if box[3] >= img.height:
        raise Failure(f"{html}: the {what} runs past the {img.height} px window ({box})")
    return box


# A 17-layer report (the newcomer trial's model: 4 blocks of 4 linears and an output layer)
# printed to PDF: at most this many pages (it was 111 with every section open; issue 37).
PRINT_LAYERS = 17
MAX_PRINT_PAGES = 30


def write_layers_capture(path, layers, tokens=64, width=256):
    """A capture of `layers` linears (X [tokens, width], W [width, width], dY [tokens, width], F32
    Gaussians from a fixed seed) in one safetensors file, written by python/fp8a_safetensors."""
    import array
    import random
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import fp8a_safetensors
    rng = random.Random(17)
    tensors = {}
    for i in range(layers):
        for role, rows, sigma in (("activation", tokens, 1.0), ("weight", width, 0.02), ("gradient", tokens, 1e-3)):
            data = array.array("f", (rng.gauss(0.0, sigma) for _ in range(rows * width)))
            tensors[f"h.{i // 4}.linear_{i % 4}.{role}" if i < 16 else f"lm_head.{role}"] = ("F32", [rows, width], data)
    os.makedirs(path, exist_ok=True)
    fp8a_safetensors.write_safetensors(os.path.join(path, "step_000010.safetensors"), tensors, {"step": "10"})


def print_pages(chromium, html, pdf, work):
    """The number of pages `html` prints to (headless Chromium's --print-to-pdf, A4/Letter default)."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=work)
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--no-pdf-header-footer",
           f"--print-to-pdf={pdf}", "file://" + os.path.abspath(html)]
    rc, out, err = run_bounded(cmd, RENDER_TIMEOUT_S, env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS="disabled:"))
    shutil.rmtree(profile, ignore_errors=True)
    if rc != 0 or not os.path.exists(pdf):
        raise Failure(f"chromium exit {rc} printing {html}: " + "\n".join((out + err).strip().splitlines()[-4:]))
    with open(pdf, "rb") as f:
        return len(re.findall(rb"/Type\s*/Page[^s]", f.read()))


def check_print_pages(chromium, binary, work, failures, notes):
    cap = os.path.join(work, "layers17")
    write_layers_capture(cap, PRINT_LAYERS)
    out = os.path.join(work, "layers17-run")
    run_fp8(binary, ["run", "--capture", cap, "--out", out, "--cost", "none", "--quiet"], "run on 17 layers")
    pages = print_pages(chromium, os.path.join(out, "report.html"), os.path.join(work, "layers17.pdf"), work)
    if pages > MAX_PRINT_PAGES:
        failures.append(f"a {PRINT_LAYERS}-layer report prints to {pages} pages (at most {MAX_PRINT_PAGES})")
    notes.append(f"a {PRINT_LAYERS}-layer report prints to {pages} pages")


# The first screen a reader sees: the answer and the plan at a glance must be on it whole.
FIRST_SCREEN = (1400, 900)


def check_first_screen(chromium, html, work, failures, notes):
    text = open(html, encoding="utf-8").read()
    for tag, marker, what in (("<div", '<div class="answer">', "answer"), ("<table", '<table class="plan">', "plan grid")):
        at = text.find(marker)
        if at < 0:
            failures.append(f"{html}: no {what} ({marker})")
            continue
        try:
            box = element_box(chromium, html, work, text, at, tag, what, FIRST_SCREEN)
            notes.append(f"{what} at y {box[1]}..{box[3]} of the {FIRST_SCREEN[0]}x{FIRST_SCREEN[1]} first screen")
        except Failure as e:
            failures.append(f"first screen: {e}")


def pixel_change(a, b):
    """Pixels where two same-sized crops differ, and how many of those are colour in either."""
    diff = chroma = 0
    for y in range(a.height):
        if a.rows[y] == b.rows[y]:
            continue
        for pa, pb in zip(a.rgb_row(y), b.rgb_row(y)):
            if pa != pb:
                diff += 1
                if max(pa) - min(pa) > CHROMA or max(pb) - min(pb) > CHROMA:
                    chroma += 1
    return diff, chroma


def run_fp8(binary, args, what):
    rc, out, err = run_bounded([binary, *args], RUN_TIMEOUT_S)
    if rc != 0:
        raise Failure(f"{what}: exit {rc}: {err.strip()[-500:]}")


def check_detectors(chromium, work):
    """This Chromium's logging still shows what the checks look for: a planted console error and
    an external image must both be seen."""
    bad = os.path.join(work, "planted.html")
    with open(bad, "w") as f:
        f.write('<!DOCTYPE html><html><head></head><body><p>planted</p>'
                '<script>console.error("planted console error")</script>'
                '<img src="http://fp8a-planted.invalid/x.png" alt=""/></body></html>')
    r = render(chromium, bad, os.path.join(work, "planted.png"), work, window=(400, 300))
    problems = []
    if not any("planted console error" in line for line in r.console):
        problems.append("a planted console.error was not seen in Chromium's log")
    if not any("fp8a-planted.invalid" in u for u in r.requests):
        problems.append("a planted external <img> was not seen in Chromium's net log")
    if problems:
        raise Failure("the detectors do not work with this Chromium: " + "; ".join(problems))


def check_page(chromium, html, work, keep):
    failures = []
    name = os.path.basename(html)
    r = render(chromium, html, os.path.join(work, "page.png"), work)
    check_loads_clean(name, r, failures)
    share, colours, chroma = check_not_blank(name, r, failures)
    if keep:
        shutil.copy(r.png, os.path.join(keep, os.path.splitext(name)[0] + ".png"))
    return failures, f"{name}: {share:.1%} non-white, {colours} colours, {chroma} colour pixels"


def check_runs(chromium, binary, repo, work, keep):
    failures, notes = [], []
    sample = os.path.join(work, "sample")
    run_fp8(binary, ["run", "--capture", os.path.join(repo, "datasets", "sample"), "--out", sample, "--cost", "none",
                     "--quiet"], "run on datasets/sample")
    reports = {}
    for tag, steps in (("early", "1,2"), ("late", "99,100")):
        cap = os.path.join(work, tag + "-capture")
        run_fp8(binary, ["synth", "--preset", "outlier-growth", "--out", cap, "--steps", steps], f"synth {tag}")
        out = os.path.join(work, tag)
        run_fp8(binary, ["run", "--capture", cap, "--out", out, "--cost", "none", "--quiet"], f"run on synth {tag}")
        reports[tag] = os.path.join(out, "report.html")

    # compare.html: the early synth run against the late one.
    cmp_out = os.path.join(work, "compare")
    run_fp8(binary, ["compare", os.path.join(work, "early-capture"), os.path.join(work, "late-capture"),
                     "--out", cmp_out, "--quiet"], "compare early late")

    check_first_screen(chromium, os.path.join(sample, "report.html"), work, failures, notes)
    check_print_pages(chromium, binary, work, failures, notes)
    # The heatmaps are folded under the plan: the pages compared are the unfolded copies.
    reports = {t: unfolded(html, work) for t, html in reports.items()}
    renders = {}
    for name, html in (("sample", os.path.join(sample, "report.html")), ("early", reports["early"]),
                       ("late", reports["late"]), ("compare", os.path.join(cmp_out, "compare.html"))):
        r = render(chromium, html, os.path.join(work, name + ".png"), work)
        page = "compare.html" if name == "compare" else f"{name} report.html"
        check_loads_clean(page, r, failures)
        share, colours, chroma = check_not_blank(page, r, failures)
        notes.append(f"{name}: {share:.1%} non-white, {colours} colours, {r.seconds:.1f} s")
        renders[name] = r
        if keep:
            shutil.copy(r.png, os.path.join(keep, name + ".png"))

    texts = {t: open(reports[t], encoding="utf-8").read() for t in reports}
    svg_id = first_heatmap(texts["early"])[0]
    if first_heatmap(texts["late"])[0] != svg_id:
        failures.append(f"the two runs' first heatmaps differ in kind: {svg_id}, {first_heatmap(texts['late'])[0]}")
        return failures, notes
    boxes = {t: heatmap_box(chromium, reports[t], work) for t in reports}
    (ex0, ey0, ex1, ey1), (lx0, ly0, lx1, ly1) = boxes["early"], boxes["late"]
    if (ex1 - ex0, ey1 - ey0) != (lx1 - lx0, ly1 - ly0):
        failures.append(f"heatmap #{svg_id} has another size in the two runs: {boxes}")
        return failures, notes
    crop_e = renders["early"].image.crop(*boxes["early"])
    crop_l = renders["late"].image.crop(*boxes["late"])
    again = render(chromium, reports["early"], os.path.join(work, "early-again.png"), work)
    same, _ = pixel_change(crop_e, again.image.crop(*boxes["early"]))
    if same:
        failures.append(f"heatmap #{svg_id}: the same page rendered twice differs in {same} pixels")
    diff, chroma = pixel_change(crop_e, crop_l)
    area = crop_e.width * crop_e.height
    if chroma < MIN_HEATMAP_CHANGE * area:
        failures.append(f"heatmap #{svg_id}: {chroma} colour pixels of {area} changed between steps 1,2 and 99,100 "
                        f"(min {MIN_HEATMAP_CHANGE:.0%}); {diff} in all")
    notes.append(f"heatmap #{svg_id} {crop_e.width}x{crop_e.height} at {boxes['early'][:2]}: "
                 f"{chroma / area:.1%} colour pixels changed with the data, 0 between two renders")
    if keep:
        for tag, crop in (("early", crop_e), ("late", crop_l)):
            with open(os.path.join(keep, f"heatmap-{tag}.png"), "wb") as f:
                f.write(pngio.encode(crop))
    return failures, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", nargs="?")
    ap.add_argument("repo", nargs="?")
    ap.add_argument("--page")
    ap.add_argument("--keep")
    a = ap.parse_args()
    if not a.page and not (a.binary and a.repo):
        ap.error("FP8_ADVISOR REPO_ROOT, or --page FILE")
    pngio.self_test()
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: chromium is not installed (apt-get install chromium; scripts/install-deps.sh does)")
        return 77
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fp8a-render-") as work:
        version = chromium
        try:
            _, out, err = run_bounded([chromium, "--version"], 30)
            version = out.strip() or err.strip()
            check_detectors(chromium, work)
            if a.page:
                failures, notes = check_page(chromium, a.page, work, a.keep)
                notes = [notes]
            else:
                failures, notes = check_runs(chromium, a.binary, a.repo, work, a.keep)
        except Failure as e:
            failures, notes = [str(e)], []
    if failures:
        for f in failures:
            print(f"FAIL: {f}")
        return 1
    print(f"OK: {version}, {time.monotonic() - t0:.0f} s; " + "; ".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
