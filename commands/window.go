package commands

import (
	"fmt"

	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
)

// Learn keeps a cache window another process opened, brought by the log
// (reactors/windows), as this process's state of its stream: an identical call reaching this
// process while it is open is then known free, where a guess of "not open" would run it and
// have its commit refused on the window (one round trip per batch, then a read of its windows).
// A window stream's state is its last CacheWindowOpened alone (CacheWindow.Evolve), so the one
// event is the stream's state at its revision; a later one this process holds is kept.
func (h *Windows) Learn(rec eventstore.RecordedEvent) error {
	if eventstore.Category(rec.Stream) != execution.CacheCategory {
		return fmt.Errorf("learn window: %s is not a cache window's stream", rec.Stream)
	}
	if cur, _, shared := cachedState(h, rec.Stream, cacheWindowAgg); shared && cur.exists && cur.revision >= rec.Revision {
		// Known as of this event or later: every window this process opened itself, which the
		// log brings back to it too. Decoding it again was most of what learning cost.
		return nil
	}
	w, _, err := fold(loaded[execution.CacheWindow]{state: cacheWindowAgg.zero}, false, cacheWindowAgg, rec.Stream, []eventstore.RecordedEvent{rec})
	if err != nil {
		return fmt.Errorf("learn window: %w", err)
	}
	h.cache.put(rec.Stream, w)
	return nil
}
