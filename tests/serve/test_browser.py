"""Pages a person looks at, rendered by a real browser (Debian's chromium, headless): the
`bulkhead serve` dashboard, loaded from a running server, shows its table of models; the
`bulkhead check` HTML report shows its charts with nothing cut off at their edges."""
import os
import re
import shutil
import subprocess

import pytest

from test_serve import MODELS, Server, conv_model, need_data, BIN

CHROMIUM = shutil.which("chromium")


def chromium(tmp_path, url, *args):
    if not CHROMIUM:
        pytest.fail("chromium is not installed (scripts/install-deps.sh installs it)")
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def screenshot(tmp_path, url, name):
    png = tmp_path / name
    r = chromium(tmp_path, url, "--window-size=1400,900", f"--screenshot={png}")
    assert png.exists(), r.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5000  # a blank page is a few hundred bytes
    return png


def test_the_dashboard_shows_the_models(tmp_path):
    need_data()
    root = tmp_path / "repo"
    os.makedirs(root / "ppocrv4_rec" / "1")
    shutil.copyfile(os.path.join(MODELS, "ppocrv4_rec", "model.onnx"), root / "ppocrv4_rec" / "1" / "model.onnx")
    os.makedirs(root / "broken" / "1")
    (root / "broken" / "1" / "model.onnx").write_bytes(b"not a model")
    s = Server(root)
    try:
        status = s.get("/status.json").json()
        assert {m["name"] for m in status["models"]} == {"ppocrv4_rec", "broken"}
        dom = chromium(tmp_path, s.url + "/", "--dump-dom").stdout
        rows = re.findall(r"<tr>(.*?)</tr>", dom.split("<tbody>", 1)[1])
        cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
        rec = next(c for c in cells if c and c[0] == "ppocrv4_rec")
        assert rec[1] == "1" and rec[2] == "READY" and rec[3] == "yes" and rec[4] == "cpu" and rec[5] == "in-process"
        broken = next(c for c in cells if c and c[0] == "broken")
        assert broken[2] == "UNAVAILABLE"
        assert any("model.onnx" in c[0] for c in cells if len(c) == 1)  # its reason, on a row of its own
        assert "<p id=\"error\"></p>" in dom  # the page reached the server
        screenshot(tmp_path, s.url + "/", "dashboard.png")
    finally:
        s.stop()


# Appended to a copy of report.html: measures, in the browser's layout, whether each chart's
# texts lie inside its drawing, and writes the verdict into the page.
MEASURE = """<script>
const out = [];
for (const svg of document.querySelectorAll("svg.chart")) {
  const box = svg.getBoundingClientRect();
  for (const t of svg.querySelectorAll("text")) {
    const b = t.getBoundingClientRect();
    if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 || b.bottom > box.bottom + 0.5)
      out.push(t.textContent);
  }
}
const p = document.createElement("p");
p.id = "measured";
p.textContent = "charts=" + document.querySelectorAll("svg.chart").length + " cut=" + JSON.stringify(out);
document.body.appendChild(p);
</script></body>"""


def test_the_check_report_shows_its_charts_whole(tmp_path):
    need_data()
    model = tmp_path / "conv" / "model.onnx"
    conv_model(str(model))
    report = tmp_path / "report"
    r = subprocess.run([BIN, "check", str(model), "--schedules", "front_only,same_process,threads",
                        "--report", str(report)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    html = (report / "report.html").read_text()
    assert "999.0" not in html
    measured = tmp_path / "measured.html"
    measured.write_text(html.replace("</body>", MEASURE))
    dom = chromium(tmp_path, measured.as_uri(), "--dump-dom").stdout
    m = re.search(r'<p id="measured">charts=(\d+) cut=(.*?)</p>', dom)
    assert m, dom[-500:]
    assert int(m.group(1)) == 3
    assert m.group(2) == "[]", f"texts cut at a chart's edge: {m.group(2)}"
    screenshot(tmp_path, (report / "report.html").as_uri(), "report.png")
