#!/usr/bin/env bash
# Regenerates docs/images/plan-report.png, the README's picture of `thdpack plan --report`, from a
# real run: the page is rendered by headless Chromium (Debian's chromium, from scripts/setup.sh).
#   bash scripts/report_screenshot.sh [build/bin]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/thdpack" plan --workload longtail-32k --dp 16 --cp 2 --steps 4 --report "$work/plan.html" \
  --no-progress > /dev/null
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
  --user-data-dir="$work/profile" --window-size=1000,1250 \
  --screenshot="$work/plan-report.png" "file://$work/plan.html" 2> /dev/null
mkdir -p docs/images
cp "$work/plan-report.png" docs/images/plan-report.png
echo "wrote docs/images/plan-report.png"
