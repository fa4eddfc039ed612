"""An RFC 5545 rule read as the RFC and its reference implementation (libical) read it: its
parts, which parts go with which frequency, the parts a rule takes from DTSTART, and the first
day of the interval DTSTART falls in. Pure: :mod:`catchup.schedule.rrule` hands the rule, with
every part it takes from DTSTART written out, to python-dateutil to expand."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

FREQS = ("MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY")
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")  # Monday is 0, as date.weekday() counts
# Each list part and the numbers it takes (a minus sign counts from the end where allowed).
_RANGES = {
    "BYMONTH": (1, 12, False),
    "BYWEEKNO": (1, 53, True),
    "BYYEARDAY": (1, 366, True),
    "BYMONTHDAY": (1, 31, True),
    "BYHOUR": (0, 23, False),
    "BYMINUTE": (0, 59, False),
    "BYSETPOS": (1, 366, True),
}
_KNOWN = frozenset({"FREQ", "INTERVAL", "WKST", "BYDAY", *_RANGES})
# Parts RFC 5545 forbids with a frequency (libical refuses them too): part -> frequencies.
_NOT_WITH = {
    "BYWEEKNO": ("MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY"),
    "BYYEARDAY": ("DAILY", "WEEKLY", "MONTHLY"),
    "BYMONTHDAY": ("WEEKLY",),
}
_BYDAY = re.compile(r"([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)")
_TIME_PARTS = ("BYHOUR", "BYMINUTE")


class RuleError(ValueError):
    """A rule catchup refuses: the message says why, and how to write it instead."""


def split(body: str) -> dict[str, str]:
    """``FREQ=DAILY;BYHOUR=2`` into its parts (keys upper case); an empty part, like the
    trailing ``;`` some calendars write, is nothing."""
    parts: dict[str, str] = {}
    for item in body.split(";"):
        if not item.strip():
            continue
        key, eq, value = item.partition("=")
        key = key.strip().upper()
        if not eq or not key:
            raise RuleError(
                "expected KEY=VALUE parts separated by ';', like RRULE:FREQ=DAILY;BYHOUR=2"
            )
        if key in parts:
            raise RuleError(f"{key} is given twice")
        parts[key] = value.strip().upper()
    return parts


def refusal(parts: dict[str, str]) -> str | None:
    """Why catchup cannot read the rule as RFC 5545 does, or None."""
    freq = parts.get("FREQ")
    if freq is None:
        return "FREQ is missing: say how often, like FREQ=DAILY"
    if freq not in (*FREQS, "SECONDLY"):
        return f"invalid 'FREQ': {freq}"
    unknown = sorted(set(parts) - _KNOWN - {"BYSECOND"})
    if unknown:
        return f"unknown parameter {unknown[0]!r}"
    for part, freqs in _NOT_WITH.items():
        if part in parts and freq in freqs:
            return f"{part} does not go with FREQ={freq} (RFC 5545); {_instead(part)}"
    return _values_refusal(parts) or _unread_refusal(parts)


def _unread_refusal(parts: dict[str, str]) -> str | None:
    """Yearly combinations libical leaves unimplemented: no reference says what they mean."""
    if parts["FREQ"] != "YEARLY":
        return None
    for first, seconds in (("BYWEEKNO", ("BYMONTHDAY", "BYYEARDAY")), ("BYYEARDAY", ("BYMONTH",))):
        for second in seconds if first in parts else ():
            if second in parts:
                return (
                    f"{first} with {second} has no reading calendar programs agree on (libical "
                    f"leaves it unimplemented): name the days with {first} alone, or another way"
                )
    return None


def _instead(part: str) -> str:
    return {
        "BYWEEKNO": "use FREQ=YEARLY with it",
        "BYYEARDAY": "use FREQ=YEARLY with it, or BYMONTHDAY with FREQ=MONTHLY",
        "BYMONTHDAY": "use FREQ=MONTHLY with it",
    }[part]


def _values_refusal(parts: dict[str, str]) -> str | None:
    interval = parts.get("INTERVAL", "1")
    if not interval.isdigit() or int(interval) < 1:
        return f"INTERVAL={interval}: a whole number of at least 1"
    if parts.get("WKST", "MO") not in DAYS:
        return f"WKST={parts['WKST']}: one of {', '.join(DAYS)}"
    for part, (lo, hi, signed) in _RANGES.items():
        for item in parts[part].split(",") if part in parts else ():
            if not _in_range(item, lo, hi, signed):
                sign = "±" if signed else ""
                return f"{part}={parts[part]}: {item!r} is not a number {sign}{lo}-{hi}"
    return _byday_refusal(parts) or _no_such_day(parts)


def _no_such_day(parts: dict[str, str]) -> str | None:
    """BYMONTHDAY that no month of BYMONTH has (30 February): said at once, where expanding
    the rule would look through every year to 9999 first."""
    if "BYMONTH" not in parts or "BYMONTHDAY" not in parts:
        return None
    longest = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    months = [int(m) for m in parts["BYMONTH"].split(",")]
    days = [abs(int(d)) for d in parts["BYMONTHDAY"].split(",")]
    if any(d <= longest[m - 1] for m in months for d in days):
        return None
    return (
        f"BYMONTHDAY={parts['BYMONTHDAY']}: no month in BYMONTH={parts['BYMONTH']} has "
        "that day, so the rule never occurs"
    )


def _in_range(item: str, lo: int, hi: int, signed: bool) -> bool:
    text = item.strip()
    if signed and text[:1] in "+-":
        text = text[1:]
    return text.isdigit() and lo <= int(text) <= hi


def _byday_refusal(parts: dict[str, str]) -> str | None:
    freq = parts["FREQ"]
    for item in parts.get("BYDAY", "").split(",") if "BYDAY" in parts else ():
        match = _BYDAY.fullmatch(item.strip())
        if match is None:
            return f"BYDAY={parts['BYDAY']}: {item!r} is not a day like MO, 1FR or -1SU"
        number = match.group(1)
        if number is None:
            continue
        if not 1 <= abs(int(number)) <= 53:
            return f"BYDAY={parts['BYDAY']}: {item!r}: the number is ±1-53"
        if freq not in ("MONTHLY", "YEARLY"):
            return (
                f"BYDAY={parts['BYDAY']}: a numbered day ({item}) goes only with FREQ=MONTHLY "
                "or FREQ=YEARLY (RFC 5545)"
            )
        if "BYWEEKNO" in parts:
            return f"BYDAY={parts['BYDAY']}: a numbered day ({item}) does not go with BYWEEKNO"
    return None


def time_parts(parts: dict[str, str]) -> list[str]:
    """The parts that name a time of day: RFC 5545 forbids them with a date-only DTSTART."""
    return [part for part in _TIME_PARTS if part in parts]


def implied(parts: dict[str, str], start: datetime) -> dict[str, str]:
    """The rule with every part RFC 5545 takes from DTSTART written out, as libical takes them:
    the time of day for every frequency that expands it, the weekday of a weekly rule (and of
    a yearly one by week number), the day of a monthly one, the month and day of a yearly one
    (the month, too, when the rule names days of the month but no month)."""
    full = dict(parts)
    freq = parts["FREQ"]
    if freq in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY"):
        full.setdefault("BYHOUR", str(start.hour))
    if freq != "MINUTELY":
        full.setdefault("BYMINUTE", str(start.minute))
    full["BYSECOND"] = str(start.second)
    weekday = DAYS[start.weekday()]
    days = "BYDAY" in parts or "BYMONTHDAY" in parts
    if freq == "WEEKLY" or (freq == "YEARLY" and "BYWEEKNO" in parts):
        full.setdefault("BYDAY", weekday)
    elif freq == "MONTHLY" and not days:
        full["BYMONTHDAY"] = str(start.day)
    elif freq == "YEARLY" and "BYYEARDAY" not in parts:
        if "BYDAY" not in parts:
            full.setdefault("BYMONTH", str(start.month))
            full.setdefault("BYMONTHDAY", str(start.day))
        elif "BYMONTHDAY" in parts:
            full.setdefault("BYMONTH", str(start.month))
    return full


def interval_start(parts: dict[str, str], start: datetime) -> datetime:
    """The first day of the interval ``start`` falls in (its week from WKST, its month, its
    year), at ``start``'s time of day: BYSETPOS counts over that whole interval."""
    freq = parts["FREQ"]
    if freq == "WEEKLY":
        back = (start.weekday() - week_start(parts)) % 7
        return start - timedelta(days=back)
    if freq == "MONTHLY":
        return start.replace(day=1)
    if freq == "YEARLY":
        return start.replace(month=1, day=1)
    return start


def week_start(parts: dict[str, str]) -> int:
    return DAYS.index(parts.get("WKST", "MO"))


def week_year(d: date, wkst: int) -> int:
    """The year whose numbered weeks hold ``d``: week 1 is the first week (from ``wkst``) with
    four days or more in the year."""
    for year in (d.year + 1, d.year, d.year - 1):
        if d >= week_one(year, wkst):
            return year
    return d.year - 1


def week_number(d: date, wkst: int) -> tuple[int, int]:
    """``d``'s week number counted from the end too (-1 is the last week), weeks from ``wkst``."""
    year = week_year(d, wkst)
    first, after = week_one(year, wkst), week_one(year + 1, wkst)
    number = (d - first).days // 7 + 1
    return number, number - (after - first).days // 7 - 1


def week_one(year: int, wkst: int) -> date:
    """The first day of week 1 of ``year``, weeks starting on ``wkst``."""
    jan4 = date(year, 1, 4)
    return jan4 - timedelta(days=(jan4.weekday() - wkst) % 7)


def joined(parts: dict[str, str]) -> str:
    return "RRULE:" + ";".join(f"{key}={value}" for key, value in parts.items())
