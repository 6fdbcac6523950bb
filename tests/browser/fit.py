"""Whether a page fits its window: nothing scrolls sideways, neither the page nor a box inside it.

Django's change lists put their table in a box that scrolls sideways
(``.results``), so a list too wide for the window leaves the page itself
narrow while its last columns sit off-screen: the document's width alone
does not see it. So both are measured, from the boxes the browser drew.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

#: The document's widths, and every element that scrolls sideways with more content than room.
MEASURE = """() => {
    const root = document.documentElement;
    const scrollers = [...document.querySelectorAll('body *')].filter(element => {
        const style = getComputedStyle(element);
        return ['auto', 'scroll'].includes(style.overflowX) && element.scrollWidth > element.clientWidth + 1;
    });
    return {
        page: root.clientWidth,
        inner: window.innerWidth,
        content: root.scrollWidth,
        scrollers: scrollers.map(element => (element.id || element.className || element.tagName)
            + ' ' + element.scrollWidth + '>' + element.clientWidth),
    };
}"""


def overflow(page: Page) -> dict[str, Any]:
    """The page's widths and its sideways scrollers; ``fits`` says whether nothing is off-screen."""
    found: dict[str, Any] = page.evaluate(MEASURE)
    found["fits"] = found["content"] <= found["page"] <= found["inner"] and not found["scrollers"]
    return found


#: A table no layout can fit in 1280 px: one unbreakable 3,000-pixel cell.
WIDE_TABLE = "<table id='planted'><tr><td style='white-space: nowrap'>" + "wide " * 600 + "</td></tr></table>"


def plant_wide_table(page: Page, selector: str) -> None:
    """Append :data:`WIDE_TABLE` to the element ``selector`` finds (the check must then fail)."""
    page.locator(selector).first.evaluate(
        "(element, html) => element.insertAdjacentHTML('beforeend', html)", WIDE_TABLE
    )
