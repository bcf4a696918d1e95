#!/usr/bin/env bash
# The tests, as the README's third command runs them and CI after its install and hygiene checks: every notebook under
# nbs/ through nbdev_test (each named as it starts and completes, then every notebook's time), then every benchmark's
# smoke (benchmarks/smoke.py: each script's --smoke on the CPU, one line each), then the repository's site built from
# _quarto.yml into a temporary folder and every page checked in headless Chromium. The last line counts notebooks,
# smokes and pages together: "N passed, N failed"; the exit status is 1 if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
site=$(mktemp -d)
trap 'rm -rf "$site" "$log"' EXIT

echo "== nbdev_test (GQ_DATA_DIR=${GQ_DATA_DIR:-unset})"
nbdev_test --do-print --timing 2>&1 | tee "$log"
notebooks=${PIPESTATUS[0]}

echo "== every benchmark's smoke (benchmarks/smoke.py)"
python benchmarks/smoke.py 2>&1 | tee -a "$log"
smokes=${PIPESTATUS[0]}

echo "== the repository's site, built and checked in headless Chromium"
python -m gradient_quarantine.site --out "$site/_site" --check 2>&1 | tee -a "$log"
pages=${PIPESTATUS[0]}

echo "the notebooks, the smokes and the site took $SECONDS s"
python - "$log" "$notebooks" "$smokes" "$pages" <<'PY'
import re, sys
text, (notebooks, smokes, pages) = open(sys.argv[1]).read(), map(int, sys.argv[2:5])
done = len(re.findall(r"^- Completed ", text, re.M))
failed_block = text.split("nbdev Tests Failed On The Following Notebooks:")[1:]
failed = len(re.findall(r"^\t\S+\.ipynb$", failed_block[0], re.M)) if failed_block else 0
if notebooks != 0 and failed == 0: failed = max(1, done)      # nbdev_test died before it could list the failures
counted = re.findall(r"^benchmark smokes: (\d+) passed, (\d+) failed$", text, re.M)
smoke_passed, smoke_failed = map(int, counted[-1]) if counted else (0, 1)   # no count: the runner itself died
if smokes != 0 and smoke_failed == 0: smoke_failed = 1
checked = re.search(r"^checked (\d+) pages at 1280 and 390 px: (\d+) with problems$", text, re.M)
site_pages, site_failed = (int(checked[1]), int(checked[2])) if checked else (1, 1)   # no count: the build failed
if pages != 0 and site_failed == 0: site_failed = 1
passed = max(done - failed, 0) + smoke_passed + site_pages - site_failed
failed = failed + smoke_failed + site_failed
print(f"{passed} passed, {failed} failed")
sys.exit(1 if notebooks != 0 or smokes != 0 or pages != 0 or failed or done == 0 else 0)
PY
