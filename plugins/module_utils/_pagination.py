# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The three pagination schemes the four clouds use for listing instances.

Private to gpufleet.cloud. Each helper takes a ``fetch`` function that
makes one (already retried) call and returns ``(items, marker)``, and
yields each page as a list, so an adapter can normalise a page and drop
its raw SDK objects before asking for the next one.
"""

from __future__ import annotations

# A listing that never ends is a server bug, not a big fleet: stop rather
# than loop forever. 100,000 pages is 10 million instances at 100 a page.
MAX_PAGES = 100000


class PaginationError(Exception):
    """The server's paging markers would make the listing loop forever."""


def by_token(fetch):
    """NextToken paging (Aliyun ECS, AWS EC2).

    ``fetch(token)`` gets the page for ``token`` (None for the first) and
    returns ``(items, next_token)``; an empty or missing token ends it.
    """
    token = None
    seen = set()
    for _page in range(MAX_PAGES):
        items, token = fetch(token)
        yield list(items or ())
        if not token:
            return
        if token in seen:
            raise PaginationError("the server returned page token %r twice" % (token,))
        seen.add(token)
    raise PaginationError("more than %d pages" % MAX_PAGES)


def by_offset(fetch, limit, warn=None):
    """Offset/Limit paging where the offset counts items (Tencent CVM).

    ``fetch(offset, limit)`` returns ``(items, total_count)``. Paging stops
    at a short page (an empty one included); ``total_count`` is checked,
    never obeyed (see ``_counted``).
    """
    return _counted(fetch, limit, first=0, advance=lambda offset, got: offset + got, warn=warn)


def by_page_number(fetch, limit, warn=None):
    """Pages numbered from 1, with ``offset`` meaning the page (Huawei ECS).

    ``fetch(page, limit)`` returns ``(items, total_count)``; a short page
    ends it, as for ``by_offset``.
    """
    return _counted(fetch, limit, first=1, advance=lambda page, got: page + 1, warn=warn)


def _counted(fetch, limit, first, advance, warn=None):
    """The pages, until one holds fewer than ``limit`` items: a full page
    may have more after it, whatever the total says. A total lower than
    what the pages held loses nothing: ``warn(message)`` is called once the
    listing ended (the caller names the region); one higher is an error."""
    marker = first
    seen = 0
    total = None
    for number in range(1, MAX_PAGES + 1):
        items, total = fetch(marker, limit)
        items = list(items or ())
        seen += len(items)
        short = len(items) < limit
        if short and total is not None and seen < total:
            # A short page ends the listing, but the server counts more:
            # stopping here would list the region in part as if complete.
            # (An instance deleted meanwhile lowers the next page's total.)
            raise PaginationError("page %d held %d instance(s) of up to %d, but the total count is %d and only %d "
                                  "were listed: the listing ended short" % (number, len(items), limit, total, seen))
        yield items
        if short:
            if total is not None and seen > total and warn is not None:
                warn("the listing's total count said %d instance(s), but its %d page(s) held %d: every one is "
                     "kept (a total is a hint, the pages are the data)" % (total, number, seen))
            return
        marker = advance(marker, len(items))
    raise PaginationError("more than %d pages" % MAX_PAGES)
