package httpapi_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/apikeys"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/testenv"
)

// BenchmarkSSEIdleStreams opens SSE_BENCH_STREAMS (default 10000) idle execution streams on
// one service process and reports the memory each costs and the latency from an append to the
// client reading the update (docs/performance.md). The service runs in a child process (this
// test binary, TestSSEBenchServerProcess) so that its memory is measured alone and each side
// stays under the file descriptor limit; the executions stay CREATED (no executor runs) until
// the benchmark claims a sample of them, each claim being the append whose fan-out is timed.
//
//	go test ./http/ -run '^$' -bench BenchmarkSSEIdleStreams -benchtime 1x
func BenchmarkSSEIdleStreams(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("SSE_BENCH_STREAMS")); err == nil && v > 0 {
		n = v
	}
	const samples = 500
	for range b.N {
		runSSEBench(b, n, min(samples, n))
	}
}

// benchChild is the service process of the benchmark.
type benchChild struct {
	url, apiKey string
	priv        ed25519.PrivateKey
	ids         []string
}

func runSSEBench(b *testing.B, n, samples int) {
	out := b.TempDir() + "/child.json"
	cmd := exec.Command(os.Args[0], "-test.run=^TestSSEBenchServerProcess$", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), "SSE_BENCH_CHILD="+out, "SSE_BENCH_STREAMS="+strconv.Itoa(n))
	stdin, _ := cmd.StdinPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	var child benchChild
	testenv.Eventually(b, 10*time.Minute, "the benchmark service", func() bool {
		data, err := os.ReadFile(out)
		if err != nil {
			return false
		}
		var raw struct {
			URL, APIKey, APISecret string
			IDs                    []string
		}
		if json.Unmarshal(data, &raw) != nil {
			return false
		}
		child.url, child.apiKey, child.ids = raw.URL, raw.APIKey, raw.IDs
		if slices.Contains(child.ids, "") {
			b.Fatalf("the benchmark service failed to submit some of its %d executions (its output says why)", n)
		}
		child.priv, err = apikeys.ParseSecret(raw.APISecret)
		return err == nil
	})
	base := childStats(b, child.url)

	// Open every stream; a reader per stream (in this process, not measured) notes when each
	// update arrives.
	type arrival struct {
		id string
		at time.Time
	}
	arrivals := make(chan arrival, samples)
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	started := time.Now()
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				conn, rd := openRawStream(b, child, child.ids[i])
				mu.Lock()
				conns = append(conns, conn)
				mu.Unlock()
				go func(id string) {
					for {
						line, err := rd.ReadString('\n')
						if err != nil {
							return
						}
						if strings.Contains(line, `"status":"RUNNING"`) {
							arrivals <- arrival{id, time.Now()}
						}
					}
				}(child.ids[i])
			}
		}()
	}
	wg.Wait()
	openTime := time.Since(started)
	// A stream is taken over once its first messages are sent: the idle cost is that of
	// streams taken over.
	var idle benchStats
	testenv.Eventually(b, time.Minute, "every stream taken over", func() bool {
		idle = childStats(b, child.url)
		return idle.inPlace == 0
	})
	perStream := float64(idle.heap+idle.stack-base.heap-base.stack) / float64(n)

	// Fan-out: claim samples, SSE_BENCH_PARALLEL (default 1) at a time; latency is from the
	// append's return (in the child) to the update's arrival here, on the same clock.
	parallel := 1
	if v, err := strconv.Atoi(os.Getenv("SSE_BENCH_PARALLEL")); err == nil && v > 0 {
		parallel = v
	}
	appended := map[string]time.Time{}
	var amu sync.Mutex
	sem := make(chan struct{}, parallel)
	var tw sync.WaitGroup
	for i := range samples {
		id := child.ids[(i*n)/samples]
		sem <- struct{}{}
		tw.Add(1)
		go func() {
			defer tw.Done()
			defer func() { <-sem }()
			resp, err := http.Post(child.url+"/bench/claim?id="+id, "", nil)
			if err != nil {
				b.Error(err)
				return
			}
			var ns int64
			if resp.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(resp.Body)
				b.Errorf("claim of %s: %d %s", id, resp.StatusCode, body)
			}
			_ = json.NewDecoder(resp.Body).Decode(&ns)
			resp.Body.Close()
			amu.Lock()
			appended[id] = time.Unix(0, ns)
			amu.Unlock()
		}()
	}
	var lat []time.Duration
	got := map[string]time.Time{}
	deadline := time.After(2 * time.Minute)
	for len(got) < samples {
		select {
		case a := <-arrivals:
			got[a.id] = a.at
		case <-deadline:
			b.Fatalf("%d of %d updates arrived", len(got), samples)
		}
	}
	tw.Wait()
	for id, at := range got {
		lat = append(lat, at.Sub(appended[id]))
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(int(q*float64(len(lat))), len(lat)-1)] }
	b.ReportMetric(perStream, "B/stream")
	b.ReportMetric(float64(idle.goroutines-base.goroutines)/float64(n), "goroutines/stream")
	b.ReportMetric(float64(p(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.Logf("per stream: heap %d B, stack %d B", (idle.heap-base.heap)/uint64(n), (idle.stack-base.stack)/uint64(n))
	b.Logf("%d streams opened in %s (%.0f/s); service heap+stack %.1f MiB -> %.1f MiB, %.0f B/stream; RSS %.1f -> %.1f MiB; watchers %d; fan-out of %d updates p50 %s p99 %s max %s",
		n, openTime.Round(time.Millisecond), float64(n)/openTime.Seconds(), mib(base.heap+base.stack), mib(idle.heap+idle.stack),
		perStream, mib(base.rss), mib(idle.rss), idle.watchers, samples, p(0.5), p(0.99), lat[len(lat)-1])
	for _, c := range conns {
		c.Close()
	}
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }

type benchStats struct {
	heap, stack, rss uint64
	goroutines       int
	watchers         int
	inPlace          int64 // streams not yet taken over
}

func childStats(b *testing.B, url string) benchStats {
	resp, err := http.Get(url + "/bench/stats")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Heap, Stack, RSS uint64
		Goroutines       int
		Watchers         int
		InPlace          int64
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		b.Fatal(err)
	}
	return benchStats{s.Heap, s.Stack, s.RSS, s.Goroutines, s.Watchers, s.InPlace}
}

// openRawStream connects, sends a signed stream request and reads up to the first event.
func openRawStream(b *testing.B, c benchChild, id string) (net.Conn, *bufio.Reader) {
	target := "/v1/sdk/components/executions/" + id + "/stream"
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.url, "http://"))
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: bench\r\n%s: %s\r\n%s: %s\r\n%s: %s\r\nAccept: text/event-stream\r\n\r\n", target,
		httpapi.HeaderAPIKey, c.apiKey, httpapi.HeaderSDKTimestamp, ts, httpapi.HeaderSDKSignature, apikeys.Sign(c.priv, http.MethodGet, target, ts, nil))
	rd := bufio.NewReaderSize(conn, 512)
	status, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		b.Fatalf("stream %s: %q %v", id, status, err)
	}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if strings.Contains(line, `"status":"CREATED"`) {
			return conn, rd
		}
	}
}

// TestSSEBenchServerProcess is the service side of BenchmarkSSEIdleStreams; it runs only as
// that benchmark's child process.
func TestSSEBenchServerProcess(t *testing.T) {
	out := os.Getenv("SSE_BENCH_CHILD")
	if out == "" {
		t.Skip("the service process of BenchmarkSSEIdleStreams")
	}
	n, _ := strconv.Atoi(os.Getenv("SSE_BENCH_STREAMS"))
	env := testenv.New(t)
	ctx := context.Background()
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	hub := livehub.New(env.Store, eventstore.Filter{Categories: []string{execution.Category}}, log)
	if err := hub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ws := env.Workspace(t, int64(n)) // a core.echo submit needs its credit on hand
	key, err := env.Cmds.Workspaces.CreateAPIKey(ctx, commands.CreateAPIKey{WorkspaceID: ws, Label: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				st, err := env.Cmds.Executions.SubmitExecution(ctx, commands.SubmitExecution{WorkspaceID: ws, Module: "core.echo",
					Input: json.RawMessage(`{}`), Config: json.RawMessage(`{}`), Attempts: 1})
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = st.ID
			}
		}()
	}
	wg.Wait()
	auth := httpapi.NewSDKAuth(httpapi.SDKAuthConfig{Lookup: httpapi.LookupFromStore(env.Cmds.Workspaces.APIKey),
		RatePerSecond: 1e9, Burst: 1e9, MaxStreamsPerKey: n, Logger: log}) // one key holds every stream
	server := httpapi.NewServer(httpapi.ServerConfig{Logger: log})
	(&httpapi.SDKComponents{Cmds: env.Cmds, Registry: modules.Builtins(modules.BuiltinsConfig{}), Hub: hub,
		Auth: auth, Heartbeat: httpapi.DefaultSSEHeartbeat}).Mount(server.V1)
	server.Router.HandleFunc("/bench/stats", func(w http.ResponseWriter, _ *http.Request) {
		// Several collections: each may halve the stacks of idle goroutines, as a running
		// service's regular collections do over time.
		for range 4 {
			runtime.GC()
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		json.NewEncoder(w).Encode(map[string]any{"Heap": ms.HeapInuse, "Stack": ms.StackInuse, "RSS": rss(),
			"Goroutines": runtime.NumGoroutine(), "Watchers": hub.Watchers(), "InPlace": httpapi.StreamsInPlace()})
	})
	server.Router.HandleFunc("/bench/claim", func(w http.ResponseWriter, r *http.Request) {
		_, err := env.Cmds.Attempts.ClaimExecution(r.Context(), r.URL.Query().Get("id"), "bench",
			func(execution.State) time.Duration { return time.Hour })
		at := time.Now().UnixNano()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		json.NewEncoder(w).Encode(at)
	})
	srv := httptest.NewServer(server.Handler())
	defer srv.Close()
	data, _ := json.Marshal(map[string]any{"URL": srv.URL, "APIKey": key.APIKey, "APISecret": key.APISecret, "IDs": ids})
	if err := os.WriteFile(out+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		t.Fatal(err)
	}
	// Serve until the benchmark closes stdin.
	buf := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(buf); err != nil {
			return
		}
	}
}

// rss is the process's resident set size in bytes (Linux), 0 where unknown.
func rss() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
