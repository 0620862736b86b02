"""Synthetic page-view traffic with the shapes real analytics data has.

- URLs are Zipf-skewed over a few sites (a handful of pages get most views); some session starts
  land from a campaign (UTM parameters and click ids in the URL) and the others come direct or
  from a referrer of each channel (search, social, email, video, shopping, referral);
- visitors browse in sessions of several page views, and come back;
- event time follows a diurnal curve when back-filling a span of days;
- configurable fractions of late events (event time hours in the past), out-of-order events
  (seconds to minutes behind), duplicates (an earlier record sent again, same ``event_id``) and
  malformed records (each surely invalid, for the dead-letter path).

The same seed gives the same records, including event ids, so a rerun with a fixed seed re-sends
the same events (and the layers count them once). Without a seed every run is new traffic.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson

from ingest.pipeline import RawRecord

SITES = (("https://shop.example.com", 0.7), ("https://blog.example.com", 0.3))
USER_AGENTS = (
    # desktop
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 "
    "Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 "
    "Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 "
    "Safari/537.36 Edg/126.0.0.0",
    # mobile
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.5 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 "
    "Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 13; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) "
    "SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36",
    # tablet
    "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 "
    "Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 "
    "Safari/537.36",
    # bots
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
)
USER_AGENT_WEIGHTS = (0.22, 0.12, 0.05, 0.06, 0.2, 0.14, 0.06, 0.05, 0.03, 0.04, 0.03)
COUNTRIES = ("US", "DE", "FR", "GB", "IN", "BR", "JP", "NL", "ES", "CA", None)
COUNTRY_WEIGHTS = (0.3, 0.14, 0.08, 0.1, 0.09, 0.06, 0.05, 0.04, 0.04, 0.05, 0.05)
"""None: the visitor's country is unknown (no geo lookup)."""
EXTERNAL_REFERRERS = (
    "https://www.google.com/",
    "https://www.google.com/",
    "https://www.bing.com/",
    "https://duckduckgo.com/",
    "https://news.ycombinator.com/",
    "https://t.co/x",
    "https://www.reddit.com/r/webdev/",
    "https://www.facebook.com/",
    "https://mail.google.com/",
    "https://www.youtube.com/",
    "https://www.amazon.com/",
    "https://partner.example.org/reviews",
)
"""One of each channel of views.channels without UTM values: search, social, email, video,
shopping, referral."""
CAMPAIGNS: tuple[tuple[str, str | None], ...] = (
    ("utm_source=google&utm_medium=cpc&utm_campaign=Spring+Sale&gclid={id}", "https://www.google.com/"),
    ("utm_source=Newsletter&utm_medium=email&utm_campaign=november%20digest", None),
    (
        "utm_source=facebook&utm_medium=paid_social&utm_campaign=retargeting&fbclid={id}",
        "https://m.facebook.com/",
    ),
    ("ref=42&utm_source=partner.example.org&utm_medium=referral", "https://partner.example.org/"),
    ("utm_source=bing&utm_medium=cpc&utm_campaign=brand&msclkid={id}", "https://www.bing.com/"),
    ("utm_source=youtube&utm_medium=video&utm_campaign=Launch%20Video", "https://www.youtube.com/"),
    ("utm_campaign=cross-network-q4&utm_source=google&utm_medium=cpc", None),
    ("utm_source=%20Partner%20&utm_medium=Affiliate&utm_term=shoes", None),
    ("utm_source=sms&utm_medium=sms&utm_campaign=%E2%82%AC5-off", None),
    ("utm_source=display-network&utm_medium=banner", "https://ads.example.net/"),
)
"""Campaign queries of landing pages and the referrer each comes with: every kind of channel, UTM
values in mixed case with encoded spaces and non-ASCII, click ids unique per click (``{id}``), and
a parameter the page keeps (``ref``)."""
CAMPAIGN_SHARE = 0.2
"""Of session starts, the share that lands from a campaign."""
DIRECT_SHARE = 0.4
"""Of session starts, the share with no referrer (typed in, bookmarks, apps)."""
_CHUNK = 4096


@dataclass
class GeneratorConfig:
    total: int | None = 100_000
    """Records to emit, duplicates and malformed ones included; None means unbounded."""
    seed: int | None = None
    urls: int = 2_000
    zipf_exponent: float = 1.1
    visitors: int = 200_000
    concurrent_sessions: int = 2_000
    session_mean_views: float = 6.0
    span_hours: float = 0.0
    """0: live traffic stamped now. >0: back-fill event times over the last span_hours."""
    late_fraction: float = 0.01
    late_hours: tuple[float, float] = (1.0, 6.0)
    out_of_order_fraction: float = 0.05
    out_of_order_seconds: tuple[float, float] = (1.0, 300.0)
    duplicate_fraction: float = 0.01
    malformed_fraction: float = 0.001
    now: datetime | None = None
    """The clock the run is relative to; fixed by tests for reproducible event times."""

    def __post_init__(self) -> None:
        for name in ("late_fraction", "out_of_order_fraction", "duplicate_fraction", "malformed_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value}")
        if self.duplicate_fraction + self.malformed_fraction > 1.0:
            raise ValueError("duplicate_fraction + malformed_fraction must not exceed 1")
        if self.span_hours > 0 and self.total is None:
            raise ValueError("a back-fill (span_hours > 0) needs a total")


@dataclass
class GeneratorStats:
    originals: int = 0
    duplicates: int = 0
    malformed: int = 0
    late: int = 0
    out_of_order: int = 0
    malformed_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> int:
        """Records that must land on `events` (duplicates included: the layers dedup)."""
        return self.originals + self.duplicates


def _corruptions() -> list[tuple[str, Callable[[dict[str, Any]], bytes]]]:
    """Ways to break a good event; each result fails the contract for a known reason."""

    def dumps(d: dict[str, Any]) -> bytes:
        return orjson.dumps(d, option=orjson.OPT_UTC_Z)

    def drop(key: str) -> Callable[[dict[str, Any]], bytes]:
        return lambda e: dumps({k: v for k, v in e.items() if k != key})

    def with_(key: str, value: Any) -> Callable[[dict[str, Any]], bytes]:
        return lambda e: dumps({**e, key: value})

    return [
        ("truncated-json", lambda e: dumps(e)[: len(dumps(e)) // 2]),
        ("not-an-object", lambda e: orjson.dumps([e["event_id"], e["url"]])),
        ("missing-visitor", drop("visitor_id")),
        ("missing-ts", drop("ts")),
        ("bad-scheme", lambda e: dumps({**e, "url": e["url"].replace("https://", "ftp://", 1)})),
        ("naive-ts", lambda e: dumps({**e, "ts": e["ts"].replace(tzinfo=None).isoformat()})),
        ("far-future", lambda e: dumps({**e, "ts": e["ts"] + timedelta(days=3)})),
        ("huge-visitor-id", with_("visitor_id", "v" * 300)),
        ("bad-country", with_("country", "Germany")),
        ("unknown-field", with_("campaign", "spring")),
        ("wrong-version", with_("schema_version", 99)),
    ]


class TrafficGenerator:
    """Iterable of raw records (dicts for events, bytes for malformed ones)."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        seed = config.seed if config.seed is not None else random.SystemRandom().getrandbits(32)
        self.seed = seed
        self.run_id = f"{seed:08x}"
        self.stats = GeneratorStats()
        self._np = np.random.default_rng(seed)
        self._py = random.Random(seed)
        self._now = config.now or datetime.now(UTC)
        self._urls = self._make_urls()
        ranks = np.arange(1, config.urls + 1, dtype=np.float64)
        weights = ranks**-config.zipf_exponent
        self._url_p = weights / weights.sum()
        self._sessions: list[int] = self._np.integers(0, config.visitors, config.concurrent_sessions).tolist()
        self._last_url: list[str | None] = [None] * config.concurrent_sessions
        """The page each session saw last: the referrer of its next page (internal navigation)."""
        # A visitor keeps a device and a country: drawn once per visitor, weighted like real traffic.
        self._visitor_ua: list[int] = self._np.choice(
            len(USER_AGENTS), size=config.visitors, p=np.array(USER_AGENT_WEIGHTS) / sum(USER_AGENT_WEIGHTS)
        ).tolist()
        self._visitor_country: list[int] = self._np.choice(
            len(COUNTRIES), size=config.visitors, p=np.array(COUNTRY_WEIGHTS) / sum(COUNTRY_WEIGHTS)
        ).tolist()
        self._recent: list[dict[str, Any]] = []
        self._corrupt = _corruptions()
        self._time_cdf = self._diurnal_cdf() if config.span_hours > 0 else None
        self._campaigns = np.random.default_rng([seed, 32])
        """Its own stream: the other draws are those of a generator without campaigns."""

    def _make_urls(self) -> list[str]:
        urls = []
        for i in range(self.config.urls):
            base = SITES[0][0] if self._py.random() < SITES[0][1] else SITES[1][0]
            kind = ("p", "c", "blog", "help")[i % 4]
            urls.append(f"{base}/{kind}/{i}" if i else f"{base}/")
        return urls

    def _diurnal_cdf(self) -> tuple[np.ndarray, np.ndarray]:
        """Minute edges over the span and the cumulative share of traffic up to each edge.

        Traffic per minute follows a day curve peaking at 15:00 UTC with a trough at 03:00, about
        4:1, which is the shape page-view logs of one region usually have.
        """
        minutes = max(1, math.ceil(self.config.span_hours * 60))
        start = self._now - timedelta(hours=self.config.span_hours)
        edges = np.arange(minutes + 1, dtype=np.float64) * 60.0 + start.timestamp()
        hour_of_day = ((edges[:-1] % 86400) / 3600.0 + 0.5 / 60) % 24
        density = 1.0 + 0.6 * np.cos((hour_of_day - 15.0) / 24.0 * 2 * math.pi)
        cdf = np.concatenate([[0.0], np.cumsum(density)])
        return edges, cdf / cdf[-1]

    def _event_times(self, start_index: int, size: int) -> np.ndarray:
        """Epoch seconds for the next ``size`` originals (monotonic before late/out-of-order)."""
        if self._time_cdf is None:
            return np.full(
                size, datetime.now(UTC).timestamp() if self.config.now is None else self._now.timestamp()
            )
        edges, cdf = self._time_cdf
        total = self.config.total or 1
        u = (np.arange(start_index, start_index + size, dtype=np.float64) + 0.5) / total
        times: np.ndarray = np.interp(u, cdf, edges)
        return times

    def __iter__(self) -> Iterator[RawRecord]:
        cfg = self.config
        emitted = 0
        while cfg.total is None or emitted < cfg.total:
            size = _CHUNK if cfg.total is None else min(_CHUNK, cfg.total - emitted)
            yield from self._chunk(emitted, size)
            emitted += size

    def _chunk(self, start_index: int, size: int) -> Iterator[RawRecord]:
        cfg = self.config
        rng = self._np
        # Draw a chunk at a time with numpy, then index plain lists: a numpy scalar per access
        # would cost more than the rest of the per-event work.
        url_idx = rng.choice(len(self._urls), size=size, p=self._url_p).tolist()
        slots = rng.integers(0, cfg.concurrent_sessions, size=size).tolist()
        session_end = (rng.random(size) < 1.0 / cfg.session_mean_views).tolist()
        new_visitors = rng.integers(0, cfg.visitors, size=size).tolist()
        kind = rng.random(size).tolist()
        lateness = rng.random(size).tolist()
        shift = rng.random(size).tolist()
        times = self._event_times(start_index, size).tolist()
        ref_roll = rng.random(size).tolist()
        campaign_roll = self._campaigns.random(size).tolist()
        last_url = self._last_url
        visitor_ua = self._visitor_ua
        visitor_country = self._visitor_country
        late_lo, late_hi = cfg.late_hours
        ooo_lo, ooo_hi = cfg.out_of_order_seconds
        dup_cut = cfg.duplicate_fraction
        bad_cut = dup_cut + cfg.malformed_fraction
        stats = self.stats
        recent = self._recent
        sessions = self._sessions
        urls = self._urls
        for i in range(size):
            roll = kind[i]
            if roll < dup_cut and recent:
                stats.duplicates += 1
                yield recent[int(shift[i] * len(recent))]
                continue
            ts = times[i]
            if lateness[i] < cfg.late_fraction:
                ts -= (late_lo + (late_hi - late_lo) * shift[i]) * 3600.0
                stats.late += 1
            elif lateness[i] < cfg.late_fraction + cfg.out_of_order_fraction:
                ts -= ooo_lo + (ooo_hi - ooo_lo) * shift[i]
                stats.out_of_order += 1
            slot = slots[i]
            visitor = sessions[slot]
            referrer = last_url[slot]
            url = urls[url_idx[i]]
            if referrer is None and campaign_roll[i] < CAMPAIGN_SHARE:
                query, referrer = CAMPAIGNS[int(campaign_roll[i] / CAMPAIGN_SHARE * len(CAMPAIGNS))]
                url = f"{url}?{query.format(id=f'{self.run_id}{start_index + i:x}')}"
            elif referrer is None and ref_roll[i] >= DIRECT_SHARE:
                share = (ref_roll[i] - DIRECT_SHARE) / (1.0 - DIRECT_SHARE)
                referrer = EXTERNAL_REFERRERS[int(share * len(EXTERNAL_REFERRERS))]
            if session_end[i]:
                sessions[slot] = new_visitors[i]
                last_url[slot] = None
            else:
                last_url[slot] = url
            n = start_index + i
            event: dict[str, Any] = {
                "event_id": f"{self.run_id}-{n:x}",
                "ts": datetime.fromtimestamp(ts, UTC),
                "visitor_id": f"v{visitor}",
                "url": url,
                "user_agent": USER_AGENTS[visitor_ua[visitor]],
            }
            country = COUNTRIES[visitor_country[visitor]]
            if country is not None:
                event["country"] = country
            if referrer is not None:
                event["referrer"] = referrer
            if dup_cut <= roll < bad_cut:
                name, corrupt = self._corrupt[n % len(self._corrupt)]
                stats.malformed += 1
                stats.malformed_kinds[name] = stats.malformed_kinds.get(name, 0) + 1
                yield corrupt(event)
                continue
            stats.originals += 1
            if len(recent) < 10_000:
                recent.append(event)
            else:
                recent[n % 10_000] = event
            yield event
