"""report.html rendered by a real headless Chromium (no compilation: a synthetic run).

Checks that the page renders (a screenshot that is not blank), that the verdict is
in the rendered DOM, and that every embedded picture decodes in the browser
(``naturalWidth > 0``): a copy of the page gets a tiny inline script that, on
``load``, writes the images' sizes into the DOM before Chromium dumps it.  The
report itself has no script.  Skipped, naming what to install, when no Chromium
is found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from report_runs import ct_run, pe_run

from pemc_stan.output.report import REPORT_NAME, write_report

#: Names the Chromium executable goes by (Debian's ``chromium`` first).
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
            "chrome", "headless_shell")

_PROBE = """<script>
window.addEventListener("load", function () {
  var out = document.createElement("pre");
  out.id = "pemc-image-check";
  out.textContent = JSON.stringify(Array.prototype.map.call(
    document.images, function (img) {
      return {alt: img.alt, complete: img.complete, width: img.naturalWidth,
              height: img.naturalHeight};
    }));
  document.body.appendChild(out);
});
</script>
"""


def _browser() -> str:
    for name in (os.environ.get("PEMC_STAN_CHROMIUM"), *BROWSERS):
        path = shutil.which(name) if name else None
        if path:
            return path
    pytest.skip("no headless Chromium found (looked for " + ", ".join(BROWSERS) + "): "
                "install the Debian package chromium (apt-get install chromium), or set "
                "PEMC_STAN_CHROMIUM to a Chromium or Chrome executable")


def _chromium(browser: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [browser, "--headless", "--disable-gpu", "--no-sandbox",
               "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
               f"--user-data-dir={tmp / 'profile'}", "--virtual-time-budget=10000", *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{' '.join(command)} failed:\n{proc.stderr[-2000:]}"
    return proc


@pytest.mark.parametrize("make_run, status", [(ct_run, "OK"), (pe_run, "SUSPECT")])
def test_report_renders_in_chromium(tmp_path: Path, make_run: object, status: str) -> None:
    browser = _browser()
    folder = make_run(tmp_path / "run")  # type: ignore[operator]
    write_report(folder)
    page = folder / REPORT_NAME
    text = page.read_text()
    expected = len(re.findall(r"<img ", text))
    assert expected >= 4

    # the DOM as rendered, with every image decoded
    probe = folder / "probe.html"
    probe.write_text(text.replace("</body>", _PROBE + "</body>"))
    dom = _chromium(browser, tmp_path, "--dump-dom", probe.as_uri()).stdout
    assert f"Verdict: {status}" in dom
    assert 'id="summary"' in dom and "Stan programs" in dom
    found = re.search(r'<pre id="pemc-image-check">(.*?)</pre>', dom, flags=re.S)
    assert found is not None, "the load handler did not run: " + dom[-500:]
    images = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert len(images) == expected
    for image in images:
        assert image["complete"] and image["width"] > 100 and image["height"] > 100, image

    # the page itself (no script) renders to a screenshot that is not blank
    shot = tmp_path / "shot.png"
    _chromium(browser, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600",
              page.as_uri())
    import matplotlib.image

    pixels = np.asarray(matplotlib.image.imread(str(shot)), dtype=float)[..., :3]
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000
    assert pixels.std() > 0.05  # text, tables and pictures, not a blank page
    # the verdict box's colour (green for ok, red for suspect) is on screen
    colours = pixels.reshape(-1, 3)
    green = (colours[:, 1] - colours[:, 0] > 0.2) & (colours[:, 1] - colours[:, 2] > 0.1)
    red = (colours[:, 0] - colours[:, 1] > 0.3) & (colours[:, 0] - colours[:, 2] > 0.3)
    assert (green if status == "OK" else red).mean() > 1e-4
