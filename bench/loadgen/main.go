// Command loadgen: a closed-loop HTTP load generator for bench/api.py.
//
// C connections each send GET requests back to back (keep-alive), cycling through the given
// URLs, for a fixed duration after a warm-up; it prints one JSON object with the request rate and
// latency percentiles. Written in Go so that the generator, on the same 2-core machine as the
// API, costs a fraction of the CPU a Python client would.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

type result struct {
	Requests     int     `json:"requests"`
	Errors       int     `json:"errors"`
	Non2xx       int     `json:"non_2xx"`
	Seconds      float64 `json:"seconds"`
	RequestsPerS float64 `json:"requests_per_s"`
	P50Ms        float64 `json:"p50_ms"`
	P90Ms        float64 `json:"p90_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	Connections  int     `json:"connections"`
}

func main() {
	urlsFile := flag.String("urls", "", "file with one URL per line")
	conns := flag.Int("c", 8, "connections")
	duration := flag.Duration("d", 15*time.Second, "measured duration")
	warmup := flag.Duration("warmup", 3*time.Second, "warm-up before measuring")
	flag.Parse()

	f, err := os.Open(*urlsFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var urls []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		if line := scanner.Text(); line != "" {
			urls = append(urls, line)
		}
	}
	f.Close()
	if len(urls) == 0 {
		fmt.Fprintln(os.Stderr, "no URLs")
		os.Exit(2)
	}

	transport := &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns, DisableCompression: true}
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	start := time.Now()
	measureFrom := start.Add(*warmup)
	end := measureFrom.Add(*duration)
	var mu sync.Mutex
	var latencies []time.Duration
	errors, non2xx := 0, 0
	var wg sync.WaitGroup
	for w := 0; w < *conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			local := make([]time.Duration, 0, 1<<16)
			localErrors, localNon2xx := 0, 0
			for i := w; ; i++ {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				resp, err := client.Get(urls[i%len(urls)])
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				elapsed := time.Since(t0)
				if t0.Before(measureFrom) {
					continue
				}
				switch {
				case err != nil:
					localErrors++
				case resp.StatusCode >= 300:
					localNon2xx++
				}
				local = append(local, elapsed)
			}
			mu.Lock()
			latencies = append(latencies, local...)
			errors += localErrors
			non2xx += localNon2xx
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	seconds := duration.Seconds()
	out := result{
		Requests: len(latencies), Errors: errors, Non2xx: non2xx, Seconds: seconds,
		RequestsPerS: float64(len(latencies)) / seconds,
		P50Ms:        pct(0.50), P90Ms: pct(0.90), P99Ms: pct(0.99), MaxMs: pct(1.0), Connections: *conns,
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
