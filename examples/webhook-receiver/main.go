// Command webhook-receiver receives Switchyard's component.execution.terminal webhooks
// (SPEC.md 6.1) and verifies their signatures with client/webhook.Verify.
//
//	WEBHOOK_SECRET=... go run ./examples/webhook-receiver -addr :8443 -cert cert.pem -key key.pem
//
// Submit with "callbackUrl": "https://<this host>:8443/hooks/switchyard" and
// "callbackSecret": the same WEBHOOK_SECRET. The service only calls https URLs (and no private
// addresses unless SWITCHYARD_WEBHOOK_ALLOW_PRIVATE=true), so serve TLS with -cert and -key,
// or put plain HTTP (no -cert) behind a TLS-terminating proxy.
//
// A delivery with a missing or wrong signature, or a timestamp more than five minutes off, is
// answered 401 and not processed. Deliveries are at least once: a retry after a lost answer,
// or a replay-callback, brings the same execution again, so the receiver acts once per
// execution id and answers 2xx to repeats (otherwise the service would keep retrying).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/switchyard/switchyard/client"
	"github.com/switchyard/switchyard/client/webhook"
)

func main() {
	addr := flag.String("addr", ":8443", "listen address")
	cert := flag.String("cert", "", "TLS certificate (PEM); without it, plain HTTP")
	key := flag.String("key", "", "TLS private key (PEM)")
	path := flag.String("path", "/hooks/switchyard", "URL path of the webhook")
	flag.Parse()
	secret := os.Getenv("WEBHOOK_SECRET")
	if secret == "" {
		log.Fatal("set WEBHOOK_SECRET to the callbackSecret given at submit")
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+*path, &receiver{secret: secret, seen: map[string]time.Time{}})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("listening on %s%s (TLS %v)", *addr, *path, *cert != "")
	var err error
	if *cert != "" {
		err = srv.ListenAndServeTLS(*cert, *key)
	} else {
		err = srv.ListenAndServe()
	}
	if !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// receiver verifies and handles deliveries.
type receiver struct {
	secret string
	mu     sync.Mutex
	seen   map[string]time.Time // execution id -> when handled; a real receiver keeps this in its database
}

func (h *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Verify over the raw bytes exactly as received, before any JSON decoding.
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	if err := webhook.Verify(h.secret, r.Header, body, 0); err != nil {
		log.Printf("rejected delivery %s: %v", r.Header.Get(webhook.HeaderDeliveryID), err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var e client.Execution
	if err := json.Unmarshal(body, &e); err != nil {
		http.Error(w, "not an execution record", http.StatusBadRequest)
		return
	}
	if h.firstTime(e.ID) {
		handle(r.Header.Get(webhook.HeaderDeliveryID), &e)
	} else {
		log.Printf("repeat delivery %s of execution %s: already handled", r.Header.Get(webhook.HeaderDeliveryID), e.ID)
	}
	w.WriteHeader(http.StatusNoContent)
}

// firstTime records id and reports whether it was new; entries older than a day are dropped,
// as the service stops retrying long before then.
func (h *receiver) firstTime(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for k, at := range h.seen {
		if now.Sub(at) > 24*time.Hour {
			delete(h.seen, k)
		}
	}
	if _, ok := h.seen[id]; ok {
		return false
	}
	h.seen[id] = now
	return true
}

// handle is where a real receiver does its work.
func handle(deliveryID string, e *client.Execution) {
	switch e.Status {
	case client.StatusCompleted:
		fmt.Printf("delivery %s: execution %s (%s) COMPLETED output=%s usage=%g\n", deliveryID, e.ID, e.Module, e.Output, e.TotalUsage)
	default:
		fmt.Printf("delivery %s: execution %s (%s) %s error=%s\n", deliveryID, e.ID, e.Module, e.Status, e.Error)
	}
}
