"""The playground in a real browser: JupyterLab on loopback, headless Chromium driven by Playwright.

Opens notebook 07 (a copy, so JupyterLab's autosave cannot touch the committed file), runs all cells, moves the K
slider, clicks Generate, and waits for coloured text and changed counters; saves a screenshot under build/.
`SPECDEC_PLAYGROUND_SCREENSHOT=<path>` also saves the playground's picture there (the README's image:
`SPECDEC_PLAYGROUND_SCREENSHOT=docs/images/07-playground.png python -m pytest tests/test_browser_playground.py`).

Needs Debian's `chromium` package (`apt-get install -y chromium`; `.ci/run` installs it) and the `playwright`
package from requirements.txt; Playwright never downloads a browser here, it drives /usr/bin/chromium (or
`$SPECDEC_CHROMIUM`).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from utils.paths import REPO_ROOT, build_dir

NOTEBOOK = REPO_ROOT / "notebooks" / "07-speculative-decoding-playground.ipynb"
CHROMIUM_ENV = "SPECDEC_CHROMIUM"
SCREENSHOT_ENV = "SPECDEC_PLAYGROUND_SCREENSHOT"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]  # plus --headless and an empty --user-data-dir
SERVER_START_SECONDS = 90
NOTEBOOK_RUN_MS = 480_000  # the whole notebook, run in the browser's kernel (94 s idle; a slow, busy machine needs more)
GENERATE_MS = 90_000
KERNEL_START_MS = 120_000
EXECUTION_START_MS = 30_000  # "Run All Cells" must have started a cell by then, or it is clicked once more
POLL_MS = 2_000


def run_all_cells(page) -> None:
    """Edit > Clear Outputs of All Cells (the committed outputs hold still copies of the widgets and numbered
    prompts), then Run > Run All Cells, and check that a cell started (a prompt shows [*] or a number); retry once."""
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.locator(".lm-MenuBar-itemLabel", has_text="Edit").first.click()
    page.get_by_role("menuitem", name="Clear Outputs of All Cells", exact=True).click()
    started = "() => [...document.querySelectorAll('.jp-Notebook .jp-InputArea-prompt')].some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"
    for attempt in range(2):
        page.locator(".jp-Notebook .jp-Cell").first.click()
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            page.wait_for_function(started, timeout=EXECUTION_START_MS)
            return
        except Exception:  # Playwright's TimeoutError
            if attempt:
                raise AssertionError(f"Run All Cells started no cell within {EXECUTION_START_MS / 1000:.0f} s, twice; "
                                     f"the page: {page_diagnostics(page)}") from None


def page_diagnostics(page, lab_log: Path | None = None) -> str:
    """What a failure message needs: kernel state, dialogs, the playground's message, error outputs, the server log."""
    def texts(selector: str, limit: int = 3) -> list[str]:
        return [" ".join(text.split())[:600] for text in page.locator(selector).all_text_contents()[:limit]]

    parts = {
        "kernel status": page.evaluate("() => [...document.querySelectorAll('.jp-Notebook-ExecutionIndicator')]"
                                       ".map(e => e.dataset.status)"),
        "cell prompts": page.evaluate("() => [...document.querySelectorAll('.jp-Notebook .jp-InputArea-prompt')]"
                                      ".map(p => p.textContent.trim()).filter(Boolean).join(' ')"),
        "dialogs": texts(".jp-Dialog"),
        "playground messages": texts(".specdec-message"),
        "counters": texts(".specdec-counters"),
        "stderr and error outputs": texts('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'),
    }
    if lab_log is not None and lab_log.is_file():
        parts["JupyterLab log (end)"] = lab_log.read_text(errors="replace")[-2500:]
    return "\n".join(f"{name}: {value}" for name, value in parts.items())


def wait_for_finished_generation(page, lab_log: Path) -> None:
    """Wait for the playground's counters to say finished; fail early, with what the page shows, on an error."""
    finished = page.locator('.specdec-counters [data-state="finished"]')
    failed = page.locator('.specdec-message[style*="b00020"]').or_(page.locator(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').filter(
        has_text="Traceback (most recent call last)"))
    deadline = time.monotonic() + NOTEBOOK_RUN_MS / 1000
    while time.monotonic() < deadline:
        if finished.count():
            return
        if failed.count():
            raise AssertionError(f"The notebook failed in the browser:\n{page_diagnostics(page, lab_log)}")
        page.wait_for_timeout(POLL_MS)
    raise AssertionError(f"No finished generation within {NOTEBOOK_RUN_MS / 1000:.0f} s:\n"
                         f"{page_diagnostics(page, lab_log)}")


def chromium_path() -> Path:
    """Debian's Chromium, or `$SPECDEC_CHROMIUM`; a clear failure (not a skip) when it is missing."""
    path = Path(os.environ.get(CHROMIUM_ENV, "/usr/bin/chromium"))
    if not path.is_file():
        pytest.fail(f"Chromium not found at {path}: the browser test needs it. Install it with "
                    "`sudo apt-get install -y chromium` (Debian/Ubuntu; `.ci/run` does this), or set "
                    f"{CHROMIUM_ENV} to a Chromium executable.", pytrace=False)
    return path


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_is_up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def jupyter_lab(root: Path, runtime: Path, log_path: Path) -> Iterator[str]:
    """JupyterLab serving `root` on a free 127.0.0.1 port with a random token; yields its base URL with the token.

    Stopped at the end whatever happens: the REST shutdown (which stops its kernels), then SIGTERM/SIGKILL for the
    server's process group and anything it started.
    """
    port, token = free_loopback_port(), secrets.token_hex(16)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                                             os.environ.get("PYTHONPATH")])),
                   "JUPYTER_RUNTIME_DIR": str(runtime), "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}", f"--LabApp.workspaces_dir={runtime / 'workspaces'}",
               "--ServerApp.terminals_enabled=False"]
    if os.geteuid() == 0:
        command.append("--allow-root")  # CI containers run as root; the server still listens on loopback only
    log = log_path.open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while not server_is_up(f"{base}/api/status?token={token}"):
            if server.poll() is not None or time.monotonic() > deadline:
                why = f"exited with code {server.returncode}" if server.poll() is not None else \
                    f"did not answer within {SERVER_START_SECONDS} s"
                raise RuntimeError(f"JupyterLab on {base} {why}; its log:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"{base}|{token}"
    finally:
        stop_server(server, f"{base}/api/shutdown?token={token}")
        log.close()


def stop_server(server: subprocess.Popen, shutdown_url: str) -> None:
    """Ask the server to shut down (kernels too), then make sure it and every process it started are gone."""
    try:
        started = psutil.Process(server.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    try:
        urllib.request.urlopen(urllib.request.Request(shutdown_url, method="POST"), timeout=5).close()
        server.wait(timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        pass
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
    for process in started:  # kernels run in sessions of their own
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


def test_playground_runs_in_a_real_browser(tmp_path: Path, offline_pair) -> None:
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("The browser test needs Playwright: `pip install -r requirements.txt` (package playwright).",
                    pytrace=False)
    root = tmp_path / "lab"
    (root / "notebooks").mkdir(parents=True)
    notebook = root / "notebooks" / NOTEBOOK.name
    shutil.copy(NOTEBOOK, notebook)  # JupyterLab autosaves outputs: never into the committed notebook
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    screenshots = build_dir() / "browser"
    screenshots.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with jupyter_lab(root, tmp_path / "runtime", screenshots / "jupyterlab.log") as address:
        base, token = address.split("|")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch_persistent_context(
                str(profile), executable_path=str(executable), headless=True, args=CHROMIUM_FLAGS,
                viewport={"width": 1400, "height": 1000})
            try:
                page = browser.new_page()
                page.set_default_timeout(60_000)
                page.goto(f"{base}/lab/tree/notebooks/{notebook.name}?token={token}")
                try:
                    run_notebook_and_generate(page, screenshots, screenshots / "jupyterlab.log")
                except Exception:
                    page.screenshot(path=str(screenshots / "07-playground-failure.png"), full_page=True)
                    raise
            finally:
                browser.close()
    print(f"browser test took {time.monotonic() - started:.0f} s")


def run_notebook_and_generate(page, screenshots: Path, lab_log: Path) -> None:
    """Run all cells, move K from its default to one more, click Generate, check the live view changed."""
    page.locator(".jp-Notebook .jp-Cell").first.wait_for()
    # "Run All Cells" clicked before the kernel is connected does nothing: wait for it to be idle first.
    page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').first.wait_for(timeout=KERNEL_START_MS)
    run_all_cells(page)
    wait_for_finished_generation(page, lab_log)  # the notebook's own click produced a finished generation
    page.locator(".specdec-formula-image").wait_for(timeout=NOTEBOOK_RUN_MS)  # the last widget cell ran
    page.locator(".specdec-race-result-box .specdec-race-result").wait_for(timeout=NOTEBOOK_RUN_MS)  # the widget, not a still copy
    counters = page.locator(".specdec-counters")
    # JupyterLab renders off-screen cells lazily (innerText is empty there): bring the playground into view first.
    page.locator(".specdec-playground").first.scroll_into_view_if_needed()
    before = counters.text_content()
    k_before = int(page.locator(".specdec-k .widget-readout").text_content().strip())
    page.locator(".specdec-k .noUi-handle").click()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "k => document.querySelector('.specdec-k .widget-readout').textContent.trim() === String(k)", arg=k_before + 1)
    page.locator("button.specdec-generate").click()
    page.wait_for_function(  # the counters restart for the new K ...
        "k => { const box = document.querySelector('.specdec-counters');"
        " return box && box.textContent.includes('K=' + k) && box.querySelector('[data-state]'); }",
        arg=k_before + 1, timeout=GENERATE_MS)
    page.locator(".specdec-text span[style*='background']").first.wait_for(timeout=GENERATE_MS)  # coloured text
    page.locator('.specdec-counters [data-state="finished"]').filter(has_text=f"K={k_before + 1}").wait_for(
        timeout=GENERATE_MS)
    after = counters.text_content()
    assert after != before and f"K={k_before + 1}" in after
    tokens = int(page.locator(".specdec-counters .specdec-tokens").text_content())
    assert tokens > 0, after
    coloured = page.locator(".specdec-text span[style*='background']").count()
    assert coloured > 0
    assert not page.locator(".specdec-message").filter(has_text="Error").count()
    playground = page.locator(".specdec-playground").first
    playground.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "07-playground-page.png"))
    playground.screenshot(path=str(screenshots / "07-playground.png"))
    wanted = os.environ.get(SCREENSHOT_ENV)
    if wanted:
        target = Path(wanted) if Path(wanted).is_absolute() else REPO_ROOT / wanted
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial.png")
        playground.screenshot(path=str(partial))
        partial.replace(target)
