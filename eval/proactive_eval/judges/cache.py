"""On-disk judge cache (SQLite) keyed by (judge id, model, prompt), so a re-run pays nothing twice (docs/spec.md §5).

The raw answer text is stored, not the parsed score: changing a parser never costs a new call. Each write is
committed at once, so an interrupted evaluation keeps every answer it paid for. WAL mode lets several
evaluation processes share one file.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from pathlib import Path


class JudgeCache:
    """A thread-safe ``(judge_id, model, prompt) -> answer`` store.

    Args:
        path (`str` or `Path`): the SQLite file (created with its folder when missing).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS judgments (judge_id TEXT, model TEXT, key TEXT, prompt TEXT,"
                " answer TEXT, created REAL, PRIMARY KEY (judge_id, model, key))"
            )
            self._db.commit()
        except sqlite3.DatabaseError as err:
            raise ValueError(f"{self.path}: not a usable judge cache ({err})") from None

    @staticmethod
    def _key(prompt: str) -> str:
        return hashlib.sha256(prompt.encode("utf-8")).hexdigest()

    def get(self, judge_id: str, model: str, prompt: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT answer FROM judgments WHERE judge_id=? AND model=? AND key=?",
                (judge_id, model, self._key(prompt)),
            ).fetchone()
        return None if row is None else row[0]

    def put(self, judge_id: str, model: str, prompt: str, answer: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO judgments VALUES (?, ?, ?, ?, ?, ?)",
                (judge_id, model, self._key(prompt), prompt, answer, time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
