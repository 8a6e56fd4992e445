"""The live dashboard (/dashboard on the HTTP port) in Debian's headless Chromium, driven by
selenium through chromium-driver: the page loads from the binary alone, its numbers change under
load and match /metrics, it draws the most recent traced request per stream, and a screenshot is
saved (build/dashboard.png) for a person to look at.
"""

import os
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from conftest import Server, binary_path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def build_dir() -> Path:
    return binary_path().resolve().parents[1]


@pytest.fixture(scope="module")
def srv(repository):
    s = Server(repository)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    yield d
    d.quit()


def wait_for(cond, timeout=30, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def cell(browser, model, cls):
    # The page rebuilds its table on every refresh; a cell found just before one is gone when its
    # text is read, so it is looked up again.
    for _ in range(5):
        els = browser.find_elements(By.CSS_SELECTOR, f'tr[data-model="{model}"] td.{cls}')
        try:
            return els[0].text if els else None
        except StaleElementReferenceException:
            continue
    return None


def metric(srv, name, model):
    with urllib.request.urlopen(f"{srv.http_url}/metrics", timeout=10) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and f'model="{model}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} for {model} not in /metrics")


def load(srv, stop, rows=2):
    c = httpclient.InferenceServerClient(srv.http_addr)
    x = np.ones((rows, 16), np.float32)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    while not stop.is_set():
        c.infer("tiny", [inp])


def test_dashboard_is_served_from_the_binary(srv):
    for path, kind in [("/dashboard", "text/html"), ("/dashboard/dashboard.js", "javascript"),
                       ("/dashboard/dashboard.css", "text/css")]:
        with urllib.request.urlopen(srv.http_url + path, timeout=10) as r:
            assert r.status == 200 and kind in r.headers["Content-Type"], path
            body = r.read().decode()
        assert "http://" not in body and "https://" not in body, path  # nothing fetched from elsewhere


def test_dashboard_live_numbers_match_metrics_and_trace_timeline(srv, browser):
    # A traced request for the timeline: every tiny request traced while the page is open.
    h = httpclient.InferenceServerClient(srv.http_addr)
    h.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
    browser.get(srv.http_url + "/dashboard")
    wait_for(lambda: cell(browser, "tiny", "requests") is not None, what="the tiny row")
    first = float(cell(browser, "tiny", "requests"))
    stop = threading.Event()
    workers = [threading.Thread(target=load, args=(srv, stop)) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        # Under load: the request count climbs and the throughput is above 0.
        wait_for(lambda: float(cell(browser, "tiny", "requests")) > first + 20, what="requests to climb")
        wait_for(lambda: cell(browser, "tiny", "throughput") not in ("–", "0.0"), what="a throughput")
        wait_for(lambda: cell(browser, "tiny", "p50") != "–", what="a p50")
        p50, p99 = float(cell(browser, "tiny", "p50")), float(cell(browser, "tiny", "p99"))
        assert 0 < p50 <= p99 < 10000
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, '.track[data-track="stream 0"] .slice'),
                 what="the trace timeline")
        browser.save_screenshot(str(build_dir() / "dashboard.png"))
    finally:
        stop.set()
        for w in workers:
            w.join()
        h.update_trace_settings(settings={"trace_level": ["OFF"], "trace_rate": "1000"})
    # Quiet now: the page shows what /metrics says (after its next refresh).
    want = metric(srv, "streamline_inference_request_success_total", "tiny")
    wait_for(lambda: float(cell(browser, "tiny", "requests")) == want, what=f"the page to show {want}")
    assert cell(browser, "tiny", "queue") == "0"
    tracks = {e.get_attribute("data-track") for e in browser.find_elements(By.CSS_SELECTOR, ".track")}
    assert {"request", "stream 0"} <= tracks and any(t.startswith("batch") for t in tracks), tracks
    bars = browser.find_elements(By.CSS_SELECTOR, "#batches .bar")
    assert bars, "no batch-size bars"
    assert browser.find_elements(By.CSS_SELECTOR, "#instances .bar")
    assert (build_dir() / "dashboard.png").stat().st_size > 10000
