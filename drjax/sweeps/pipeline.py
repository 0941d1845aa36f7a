"""The host thread: chunk files and table rows written while the devices compute the next
chunk."""

from __future__ import annotations

import time


class _Pipeline:
  """Host work (chunk files, tables) done in order by one background thread.

  The main thread dispatches chunk ``j + 1`` (JAX runs it asynchronously), fetches chunk ``j``
  and hands its host arrays over with ``put``; this thread writes chunk ``j`` and streams its
  rows meanwhile, so the host work is off the critical path. ``put`` blocks while ``depth`` items
  wait (bounded memory); an exception in the thread is raised by the next ``put`` / ``close``.
  ``abort()`` makes the remaining items skip everything but their chunk files (Ctrl-C: the
  computed chunks are still saved).
  """

  def __init__(self, depth: int = 2):
    import queue  # pylint: disable=g-import-not-at-top
    import threading  # pylint: disable=g-import-not-at-top

    self.queue = queue.Queue(maxsize=depth)
    self.error: BaseException | None = None
    self.aborted = threading.Event()
    self.busy_s = 0.0
    self.wait_s = 0.0
    self.thread = threading.Thread(target=self._loop, name="drjax-sweep-host", daemon=True)
    self.thread.start()

  def _loop(self) -> None:
    while True:
      item = self.queue.get()
      if item is None:
        self.queue.task_done()
        return
      if self.error is not None:
        self.queue.task_done()
        continue
      t0 = time.perf_counter()
      try:
        item[0](*item[1:])
      except BaseException as e:  # pylint: disable=broad-except  (re-raised in the main thread)
        self.error = e
      self.busy_s += time.perf_counter() - t0
      self.queue.task_done()

  def _check(self) -> None:
    if self.error is not None:
      raise self.error

  def put(self, fn, *args) -> None:
    self._check()
    t0 = time.perf_counter()
    self.queue.put((fn, *args))
    self.wait_s += time.perf_counter() - t0

  def drain(self) -> None:
    """Waits until every item put so far is done."""
    t0 = time.perf_counter()
    self.queue.join()
    self.wait_s += time.perf_counter() - t0
    self._check()

  def close(self) -> None:
    t0 = time.perf_counter()
    self.queue.put(None)
    self.thread.join()
    self.wait_s += time.perf_counter() - t0
    self._check()
