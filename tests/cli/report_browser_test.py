#!/usr/bin/python3
"""`thdpack plan --report` in a real browser: the page renders in headless Chromium with no script
error and no network, and the charts hold what the plan file says.

Usage: report_browser_test.py [--static] THDPACK OUT_DIR [plan flags ...]

--static reads the page as written instead of as Chromium rendered it (no browser, no
screenshot): the same value checks, fast enough to run over many layouts.

Writes OUT_DIR/report.html, OUT_DIR/plans.json, OUT_DIR/report.dom.html and the screenshot
OUT_DIR/report.png (kept as the test's artefact). Chromium (Debian's `chromium`, installed by
scripts/setup.sh) is required: without it the test fails.
"""

import html
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REL = 1e-6
STRAGGLER_IMBALANCE = 1.01


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def close(a, b):
    return abs(a - b) <= REL * max(abs(a), abs(b), 1e-300)


class Elements(html.parser.HTMLParser):
    """Every element with data-* attributes: (tag, attributes, classes, enclosing group attrs)."""

    def __init__(self):
        super().__init__()
        self.found = []
        self.stack = []  # attributes of open <g> / <svg> elements
        self.body = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        parents = [p for p in self.stack]
        if any(k.startswith("data-") for k in a):
            self.found.append((tag, a, set((a.get("class") or "").split()), parents))
        if tag in ("g", "svg"):
            self.stack.append(a)

    def handle_endtag(self, tag):
        if tag in ("g", "svg") and self.stack:
            self.stack.pop()


def chromium(args, profile):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        fail("chromium is not installed (scripts/setup.sh installs Debian's chromium package)")
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", f"--user-data-dir={profile}", "--enable-logging=stderr",
               "--v=0"] + args
    p = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    if p.returncode != 0:
        fail(f"chromium exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return p.stdout, p.stderr


# Run in a copy of the page: every pair of texts of one chart (tick labels, the axis title, bar
# labels, value labels) whose boxes, as laid out, overlap.
OVERLAP_SCRIPT = """<script>
(function () {
  const found = [];
  const overlap = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
                            a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  document.querySelectorAll("svg.chart").forEach((svg) => {
    const texts = [...svg.querySelectorAll("text.tick, text.axis-label, text.bar-label, " +
                                           "text.value-label")];
    const boxes = texts.map((t) => t.getBoundingClientRect());
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        if (overlap(boxes[i], boxes[j])) {
          found.push(svg.id + ": '" + texts[i].textContent + "' (" + texts[i].getAttribute("class") +
                     ") overlaps '" + texts[j].textContent + "' (" + texts[j].getAttribute("class") +
                     ")");
        }
      }
    }
  });
  document.body.setAttribute("data-overlaps", JSON.stringify(found));
})();
</script>"""
LAYOUT_WIDTHS = (1100, 700)  # a desktop window and a narrow one


def check_layout(report, profile):
    """Fails when two texts of a chart overlap as Chromium lays the page out, at each width."""
    probe = report[:-len(".html")] + ".layout.html"
    with open(report, encoding="utf-8") as f:
        page = f.read()
    with open(probe, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", OVERLAP_SCRIPT + "</body>"))
    try:
        for width in LAYOUT_WIDTHS:
            dom, _ = chromium(["--dump-dom", f"--window-size={width},1600",
                               "file://" + os.path.abspath(probe)], profile)
            m = re.search(r'data-overlaps="([^"]*)"', dom)
            if m is None:
                fail("the layout probe did not run")
            found = json.loads(html.unescape(m.group(1)))
            if found:
                fail(f"at {width} px, {len(found)} overlapping chart labels: {found[:3]}")
    finally:
        os.remove(probe)


def render(report, screenshot=None):
    """The page as headless Chromium leaves it (an Elements parse of its DOM), failing on a script
    error, when the page's script did not finish, or when chart labels overlap at any of
    LAYOUT_WIDTHS; with `screenshot`, also a picture of it at each width (NAME.png, NAME.W.png)."""
    profile = tempfile.mkdtemp(prefix="thdpack_chromium_")
    url = "file://" + os.path.abspath(report)
    try:
        dom, log = chromium(["--dump-dom", url], profile)
        check_layout(report, profile)
        if screenshot:
            for width in LAYOUT_WIDTHS:
                shot = screenshot if width == LAYOUT_WIDTHS[0] else \
                    f"{screenshot[:-len('.png')]}.{width}.png"
                chromium([f"--screenshot={shot}", f"--window-size={width},1600", url], profile)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    errors = [l for l in log.splitlines() if "Uncaught" in l or ":CONSOLE" in l]
    if errors:
        fail(f"script error in the browser: {errors[0]}")
    page = Elements()
    page.feed(dom)
    if page.body.get("data-rendered") != "ok":
        fail("the page's script did not finish (body lacks data-rendered=\"ok\")")
    return page, dom


def expected_figures(plans_file, step):
    """Per scheduler: replica times, micro-batch times, fill bins, unused tokens; from the plan
    file alone (plan_stats.hpp's model: pack cost = sum of cost(padded length) / cp, plus the
    1F1B bubble (pp-1)/pp of the replica's largest micro-batch)."""
    cp, pp, dp, capacity = (plans_file[k] for k in ("cp", "pp", "dp", "capacity"))
    lin, quad = plans_file["cost"]["linear"], plans_file["cost"]["quadratic"]
    scale = 1.0 / (plans_file["gpu_tflops"] * 1e12) if plans_file["model"] else 1.0
    s = plans_file["steps"][step]
    figures = {}
    for name, planned in s["plans"].items():
        length = dict(zip(s["ids"], planned["padded_lengths"]))
        # Fixed CP: group r of micro-batch k is the pack of replica r.
        plan = [[group["ids"] for group in mb] for mb in planned["microbatches"]]
        k_count = len(plan)
        mb = [[sum(lin * length[i] + quad * length[i] ** 2 for i in plan[k][r]) / cp
               for k in range(k_count)] for r in range(dp)]
        bubble = (pp - 1) / pp if pp > 1 else 0.0
        replica = [(sum(m) + bubble * max(m)) * scale for m in mb]
        bins = [0] * 10
        padded_total = 0
        for k in range(k_count):
            for r in range(dp):
                tokens = sum(length[i] for i in plan[k][r])
                padded_total += tokens
                bins[min(9, max(0, int(tokens / capacity * 10)))] += 1
        figures[name] = {"replica": replica, "mb": [[x * scale for x in m] for m in mb],
                         "bins": bins, "unused": dp * k_count * capacity - padded_total,
                         "k": k_count}
    counts = {name: [len(st["plans"][name]["microbatches"]) for st in plans_file["steps"]]
              for name in s["plans"]}
    return figures, counts


def main():
    args = sys.argv[1:]
    static = args[:1] == ["--static"]
    if static:
        args = args[1:]
    thdpack, out_dir, flags = args[0], args[1], args[2:]
    os.makedirs(out_dir, exist_ok=True)
    report = os.path.join(out_dir, "report.html")
    plans_path = os.path.join(out_dir, "plans.json")
    subprocess.run([thdpack, "plan", *flags, "--report", report, "--plan-out", plans_path,
                    "--no-progress"], check=True, stdout=subprocess.DEVNULL)
    with open(report, encoding="utf-8") as f:
        page = f.read()

    # Markup only where the page puts it: no tag of the input's text survives unescaped.
    if re.search(r"<(b|i)>", page):
        fail("text from the input reached the page unescaped")

    # Self-contained: nothing to fetch, no URL but the SVG namespace.
    for pattern in (r"<script[^>]*\bsrc=", r"<link\b", r"@import", r"url\(", r"<img\b",
                    r"<iframe\b"):
        if re.search(pattern, page, re.IGNORECASE):
            fail(f"the report refers to something outside it: {pattern}")
    urls = set(re.findall(r"\w+://[^\s\"'<>]*", page))
    if urls - {"http://www.w3.org/2000/svg"}:
        fail(f"the report names URLs: {sorted(urls)}")

    shot = "none (--static)"
    if static:
        parser = Elements()
        parser.feed(page)
    else:
        shot = os.path.join(out_dir, "report.png")
        parser, dom = render(report, shot)
        with open(os.path.join(out_dir, "report.dom.html"), "w", encoding="utf-8") as f:
            f.write(dom)
        if not os.path.exists(shot) or os.path.getsize(shot) < 20000:
            fail(f"no screenshot, or a blank one: {shot}")
    with open(plans_path, encoding="utf-8") as f:
        plans_file = json.load(f)
    step = int(parser.body["data-step"])
    figures, counts = expected_figures(plans_file, step)

    checked = 0
    for name, fig in figures.items():
        bars = {int(a["data-replica"]): (a, cls) for tag, a, cls, _ in parser.found
                if tag == "g" and a.get("data-scheduler") == name and "data-replica" in a}
        if sorted(bars) != list(range(plans_file["dp"])):
            fail(f"{name}: replica bars {sorted(bars)}, expected 0..{plans_file['dp'] - 1}")
        # Marked only where the step waits noticeably (plan_html_report.cpp: max/mean > 1.01).
        mean = sum(fig["replica"]) / len(fig["replica"])
        straggler = max(range(len(fig["replica"])), key=lambda r: (fig["replica"][r], -r)) \
            if max(fig["replica"]) > STRAGGLER_IMBALANCE * mean else None
        for r, (a, cls) in bars.items():
            if not close(float(a["data-value"]), fig["replica"][r]):
                fail(f"{name} replica {r}: chart {a['data-value']}, plan file "
                     f"{fig['replica'][r]!r}")
            if (a["data-straggler"] == "true") != (r == straggler) or \
                    ("straggler" in cls) != (r == straggler):
                fail(f"{name}: straggler marked on replica {r}, the plan file's is {straggler}")
            checked += 1
        segments = [(p, a) for tag, a, cls, p in parser.found if tag == "rect" and "mb" in cls
                    and p and p[-1].get("data-scheduler") == name
                    and "data-replica" in p[-1]]
        if len(segments) != plans_file["dp"] * fig["k"]:
            fail(f"{name}: {len(segments)} micro-batch segments, expected dp x K")
        for p, a in segments:
            r, k = int(p[-1]["data-replica"]), int(a["data-k"])
            if not close(float(a["data-value"]), fig["mb"][r][k]):
                fail(f"{name} replica {r} micro-batch {k}: chart {a['data-value']}, plan file "
                     f"{fig['mb'][r][k]!r}")
            checked += 1
        bins = {int(a["data-bin"]): float(a["data-value"]) for tag, a, _, _ in parser.found
                if tag == "g" and a.get("data-scheduler") == name and "data-bin" in a}
        if [bins.get(b) for b in range(10)] != [float(c) for c in fig["bins"]]:
            fail(f"{name}: fill histogram {bins}, plan file {fig['bins']}")
        unused = [float(a["data-value"]) for tag, a, _, p in parser.found
                  if tag == "rect" and a.get("data-part") == "unused"
                  and p and p[-1].get("data-scheduler") == name]
        if unused != [float(fig["unused"])]:
            fail(f"{name}: unused capacity {unused}, plan file {fig['unused']}")
        steps = {int(a["data-step"]): float(a["data-value"]) for tag, a, _, _ in parser.found
                 if tag == "g" and a.get("data-scheduler") == name and "data-step" in a}
        if [steps.get(t) for t in range(len(counts[name]))] != [float(c) for c in counts[name]]:
            fail(f"{name}: micro-batch counts {steps}, plan file {counts[name]}")
        cp_bars = [a for tag, a, _, _ in parser.found
                   if tag == "g" and a.get("data-scheduler") == name and "data-cp-rank" in a]
        # At cp 1 there is no CP split: no chart (not cp one-bar charts).
        want_cp_bars = plans_file["cp"] if plans_file["cp"] > 1 else 0
        if len(cp_bars) != want_cp_bars or any(float(a["data-value"]) <= 0 for a in cp_bars):
            fail(f"{name}: {len(cp_bars)} CP work bars, expected {want_cp_bars} non-empty")
        checked += 10 + len(counts[name]) + 1
    print(f"ok: {len(figures)} schedulers, {checked} drawn values equal the plan file's; "
          f"screenshot {shot}")


if __name__ == "__main__":
    main()
