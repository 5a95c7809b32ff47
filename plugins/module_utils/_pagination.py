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


def by_offset(fetch, limit):
    """Offset/Limit paging where the offset counts items (Tencent CVM).

    ``fetch(offset, limit)`` returns ``(items, total_count)``. Paging stops
    at a short page or once ``total_count`` items have been seen.
    """
    return _counted(fetch, limit, first=0, advance=lambda offset, got: offset + got)


def by_page_number(fetch, limit):
    """Pages numbered from 1, with ``offset`` meaning the page (Huawei ECS).

    ``fetch(page, limit)`` returns ``(items, total_count)``; a short page or
    ``total_count`` reached ends it.
    """
    return _counted(fetch, limit, first=1, advance=lambda page, got: page + 1)


def _counted(fetch, limit, first, advance):
    marker = first
    seen = 0
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
        if short or (total is not None and seen >= total):
            return
        marker = advance(marker, len(items))
    raise PaginationError("more than %d pages" % MAX_PAGES)
