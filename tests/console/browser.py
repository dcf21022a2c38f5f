"""A real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, installed by
``scripts/setup``) driven through selenium, with a fresh profile, its console log kept, and
screenshots saved as artifacts of the run (``$ODFD_TEST_ARTIFACTS``, else ``test-artifacts/``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


def artifacts_dir() -> Path:
    folder = Path(os.environ.get("ODFD_TEST_ARTIFACTS", REPO / "test-artifacts")) / "console"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Browser:
    def __init__(self) -> None:
        chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
        if chromium is None or driver is None:
            raise RuntimeError("chromium and chromium-driver are missing: run scripts/setup")
        self.profile = tempfile.mkdtemp(prefix="odfd-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self.profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(driver), options=options)

    def close(self) -> None:
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)

    def open(self, url: str) -> None:
        self.driver.get(url)

    def wait(self, what: str, condition: Callable[[], Any], timeout: float = 15.0) -> Any:
        """Poll ``condition`` until it returns something true; an element it looked at that the
        page re-rendered meanwhile (stale) just means trying again."""
        return WebDriverWait(
            self.driver,
            timeout,
            poll_frequency=0.1,
            ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
        ).until(lambda _: condition(), message=f"waiting for {what}")

    def find(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait_for(self, css: str, text: str | None = None, timeout: float = 15.0) -> WebElement:
        """The first element matching ``css`` (whose text contains ``text``, if given)."""

        def found() -> WebElement | None:
            for element in self.find(css):
                if text is None or text in element.text:
                    return element
            return None

        return self.wait(f"{css} {text or ''}".strip(), found, timeout)

    def texts(self, css: str) -> list[str]:
        return [element.text for element in self.find(css)]

    def attributes(self, css: str, name: str) -> list[str | None]:
        return [element.get_attribute(name) for element in self.find(css)]

    def console_errors(self) -> list[str]:
        """Severe entries of the page's console since the last call (script errors, failed loads)."""
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE"
        ]

    def screenshot(self, name: str) -> Path:
        path = artifacts_dir() / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path
