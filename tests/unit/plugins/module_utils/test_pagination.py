"""The three paging schemes, page by page."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _pagination as pg

ITEMS = list(range(23))


def test_token_paging_follows_next_token_across_pages():
    asked = []

    def fetch(token):
        asked.append(token)
        start = int(token or 0)
        end = start + 10
        return ITEMS[start:end], str(end) if end < len(ITEMS) else ""
    pages = list(pg.by_token(fetch))
    assert [len(p) for p in pages] == [10, 10, 3]
    assert sum(pages, []) == ITEMS
    assert asked == [None, "10", "20"]


def test_a_repeated_token_stops_an_endless_listing():
    with pytest.raises(pg.PaginationError, match="twice"):
        list(pg.by_token(lambda token: ([1], "same")))


def test_offset_paging_counts_items():
    asked = []

    def fetch(offset, limit):
        asked.append((offset, limit))
        return ITEMS[offset:offset + limit], len(ITEMS)
    assert sum(pg.by_offset(fetch, 10), []) == ITEMS
    assert asked == [(0, 10), (10, 10), (20, 10)]


def test_a_full_last_page_is_followed_by_one_more_call_whatever_the_total():
    asked, said = [], []

    def fetch(offset, limit):
        asked.append(offset)
        return ITEMS[:20][offset:offset + limit], 20
    assert len(sum(pg.by_offset(fetch, 10, warn=said.append), [])) == 20
    # A full page may have more after it: the empty one ends the listing.
    assert asked == [0, 10, 20] and said == []


@pytest.mark.parametrize("scheme", [pg.by_offset, pg.by_page_number])
@pytest.mark.parametrize("total", [0, 5, 10, 22])
def test_a_total_lower_than_the_pages_hold_loses_nothing_and_is_said(scheme, total):
    said = []

    def fetch(marker, limit):
        start = marker if scheme is pg.by_offset else (marker - 1) * limit
        return ITEMS[start:start + limit], total
    assert sum(scheme(fetch, 10, warn=said.append), []) == ITEMS
    assert said == ["the listing's total count said %d instance(s), but its 3 page(s) held 23: every one is kept "
                    "(a total is a hint, the pages are the data)" % total]


def test_page_number_paging_counts_pages_from_one():
    asked = []

    def fetch(page, limit):
        asked.append(page)
        start = (page - 1) * limit
        return ITEMS[start:start + limit], None
    assert sum(pg.by_page_number(fetch, 10), []) == ITEMS
    assert asked == [1, 2, 3]


@pytest.mark.parametrize("scheme", [pg.by_offset, pg.by_page_number])
def test_a_short_page_below_the_total_count_is_an_error_not_the_end(scheme):
    # Page 2 comes back empty while the server still counts 23: the listing
    # must not end there as if the region held 10 instances.
    pages = scheme(lambda marker, limit: (ITEMS[:limit] if marker in (0, 1) else [], len(ITEMS)), 10)
    assert next(pages) == ITEMS[:10]
    with pytest.raises(pg.PaginationError, match="page 2 held 0 instance.* total count is 23 and only 10"):
        next(pages)


def test_a_total_that_drops_while_paging_still_ends_the_listing():
    # One instance deleted between the pages: the last page is short and the
    # new total agrees with what was seen.
    totals = iter((23, 22, 22))

    def fetch(offset, limit):
        total = next(totals)
        return ITEMS[:total][offset:offset + limit], total
    assert len(sum(pg.by_offset(fetch, 10), [])) == 22
