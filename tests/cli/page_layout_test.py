#!/usr/bin/python3
"""A report page in headless Chromium: no script error, the page's script finished, and no two
chart labels overlap at either window width (report_browser_test.render); screenshots kept.

Usage: page_layout_test.py PAGE.html SCREENSHOT.png
"""

import sys

from report_browser_test import render


def main():
    page, screenshot = sys.argv[1], sys.argv[2]
    render(page, screenshot)
    print(f"ok: {page} renders with no overlapping chart labels; screenshot {screenshot}")


if __name__ == "__main__":
    main()
