package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A second serve process learns the cache windows the first opens from the log
// (reactors/windows): the identical call is then a free repeat there, with the first call's
// output.
func TestASecondServeLearnsTheWindowsTheFirstOpens(t *testing.T) {
	svc := startSDKService(t, 100, "SWITCHYARD_CACHE_WINDOW=10m")
	second, s2 := svc.startSecond(t)
	body := `{"module":"expr.eval","input":{"a":20,"b":22},"config":{"expression":"a + b"},"waitForMs":10000}`
	first := svc.caller(t, svc.key).submit(body).json(t)
	if first["status"] != "COMPLETED" || first["totalUsage"].(float64) <= 0 {
		t.Fatalf("first call: %v", first)
	}
	second.waitHTTP(s2, "/metrics", 60*time.Second, func(status int, b string) bool {
		return status == http.StatusOK && strings.Contains(b, "\nswitchyard_cache_windows_learned_total 1\n")
	})
	again := newRawCaller(t, second.url(""), svc.key).submit(body).json(t)
	if again["status"] != "COMPLETED" || again["totalUsage"] != float64(0) || fmt.Sprint(again["output"]) != fmt.Sprint(first["output"]) {
		t.Fatalf("the repeat on the second serve: %v\nfirst: %v", again, first)
	}
}
