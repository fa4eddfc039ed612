"""Migrations are immutable once on main: each shipped file keeps the checksum it shipped with,
and a change goes into a new numbered migration (a ledger migrated yesterday must reach the same
schema as a fresh one; an edited file never reaches the ledgers that applied it)."""

from __future__ import annotations

import hashlib

from catchup.ledger import sqlfiles

SHIPPED = {
    "0001_ledger": "c5645e2fc583f0a982020ab98d4f6860e5f301d950043c01a55753ba9d6c8da5",
    "0002_scan": "e2d99dc2d56f3339f4e83f9b4799b1e93b08a24381530cfa02040b4df296962a",
    "0003_ticks": "7d96dda7116181c8ae1fbb0d4b6298f8d709b714ef8aeaa384989b0ad72177e3",
    "0004_operations": "a4b2df616586f24dad312955a2790d28c88d222f5b89506776b5877e3871e8c4",
    "0005_schedules": "fb5c889778f67f881a8e32260c5d7ce4a28183ee4728830a1572df8be2bcad93",
    "0006_period_state": "c54bf6c0b3c8dfafb6001560debc3e68572fa09b22f6f9afd1e000484dc06fc2",
    "0007_claim_functions": "3247f83010053a163fe91967f1ab42742ea99859808ae3622b89f43975c873ad",
    "0008_adopt": "d24eeaaf00a9b200b6bf02bc4fb522bc7450c1bcf59274022f838170b3df0c5f",
    "0009_evidence_state": "faa1e418c26567a6795810bf605a86aa8366d5cd91a20d73e8abdfc9924f8792",
    "0010_alerts": "0199acfcb1f28e31148f8eee6a57f55dbd15583e004a9ead51f016edfbf0b82e",
    "0011_job_identity": "5f260e9fbe035c91e78d3fe13a9b3b12642030a46564817f78031ad8b0b596b0",
    "0012_definitions": "311faba17fe023b5503282faec1728f4453ac316520f239a2c46683f59c27055",
    "0013_reruns": "3bbedff4cc9f59637db62a0770e3c89dbe9ceadcba8818fd1a83ce470124efc8",
    "0014_keys": "b2426108ea5bce63613771a9e07bc06a832b15df74785efcd30125434c71be7f",
    "0015_batches": "f0ebcc8f2bddebcb313c2472031928e72b89d0030af10cf2466a53789031e52c",
    "0016_compaction": "6df70b7d970c345a37ac048ca09d65344dabecfde9175b8940d3c9531be94701",
    "0017_cancel": "a57e25495b4e330935a3bdaa9a5fcf2b8289671031d5ff7156a753793870e8ef",
    "0018_leader": "e97d103b772417295823792b853abfb13faf2e1e3fed650ed1c782bcafd41d8d",
    "0019_tick_term": "0e4bb189a2dc41375aba77d93574e2fec68de61e8337064043c93e11e30ed0b7",
    "0020_compacted": "d19c3b43e890850b3727f45135f6977efe0ad530993caecb1feff51744a01225",
    "0021_timelines": "d5254468d371903986cbba15bd75101ebeb429beb22d7ae08bbcf3e6598d337d",
    "0022_timeline_batches": "2e180ff03490dba9d4bd3b51cd0ef46de89b1723660ae943605081024bd7c999",
    "0023_cancelled_state": "8ca38a6fbd3d8c14b859809cc8704b85258da4c4fab6955460728e7d908219d8",
    "0024_leader_lanes": "7d7568d7958ff6e1e6e7f84850752995a8ffd9098f0d27a69788e4fe2950a732",
    "0025_pings": "872a002ca9e4d3942753a9476d38e89deeb3f79fb3fe163271eb9d2ce15e1dae",
    "0026_exclusions": "a87bc8999996d381be039903aa8dc4d8f716731571d69b78d9945ebfd996a779",
    "0027_keys_follow": "e931f0c62561ae650eeaa70aea902f1d3a9b609e82f5a3d22937881145040f36",
    "0028_overlap_by_key": "a9bc4c2da54a68d1318a10b88508491a3372106a2425b1f7d03f595c0e276a95",
    "0029_overlap_by_key_batches": (
        "ff88f48cd814f4c7e040b158d816b50c6e6d71ebb57e9944ea2c37c25b6cb927"
    ),
    "0030_attempts_after_history": (
        "86d02a857d8cda659ab4232b1bf2b245c5bc6ccc63f7e4486b6f57e7fc070022"
    ),
    "0031_batch_attempts_after_history": (
        "ff2285cb937053825cee9a55cdeaf5acff7cf3654c1d8ecc7ba6fbd0689fc508"
    ),
}


def test_shipped_migrations_are_unchanged() -> None:
    found = {
        name: hashlib.sha256(text.encode("utf-8")).hexdigest()
        for _, name, text in sqlfiles.migrations()
    }
    changed = [name for name, digest in SHIPPED.items() if found.get(name) != digest]
    assert not changed, (
        f"{', '.join(changed)} changed after shipping: put the change in a new numbered "
        "migration instead (and never edit one that is on main)"
    )


def test_migrations_are_numbered_one_after_another() -> None:
    numbers = [number for number, _, _ in sqlfiles.migrations()]
    assert numbers == list(range(1, len(numbers) + 1))
    # a new migration is welcome; it gets its checksum here once it is on main
    assert set(SHIPPED) <= {name for _, name, _ in sqlfiles.migrations()}
