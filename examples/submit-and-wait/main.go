// Command submit-and-wait executes the core.echo component with the Go client and waits for
// its result over the execution's stream.
//
// It reads the service and the API key from the environment:
//
//	SWITCHYARD_URL         base URL of the service (default http://localhost:8080)
//	SWITCHYARD_API_KEY     the apiKey (ws_...)
//	SWITCHYARD_API_SECRET  the apiSecret printed once when the key was minted
//
// Run it with
//
//	go run ./examples/submit-and-wait '{"hello":"world"}'
//
// The optional argument is the input object (default {"hello":"world"}). It prints the
// submitted execution, then the terminal status and output, and exits 1 if the execution
// FAILED or the wait timed out ("Execution timed out" after -timeout).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/switchyard/switchyard/client"
)

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait for the result")
	module := flag.String("module", "core.echo", "component module to execute")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: submit-and-wait [-module M] [-timeout D] [INPUT_JSON]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*module, flag.Arg(0), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "submit-and-wait:", err)
		os.Exit(1)
	}
}

func run(module, inputJSON string, timeout time.Duration) error {
	c, err := clientFromEnv()
	if err != nil {
		return err
	}
	input := map[string]any{"hello": "world"}
	if inputJSON != "" {
		input = nil // decoding into the default would merge with it
		if err := json.Unmarshal([]byte(inputJSON), &input); err != nil {
			return fmt.Errorf("the input must be a JSON object: %w", err)
		}
		if input == nil {
			return errors.New("the input must be a JSON object, not null")
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	e, err := c.Submit(ctx, client.SubmitRequest{Module: module, Input: input})
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	fmt.Printf("submitted %s: %s\n", e.ID, e.Status)

	res, err := c.WaitForResult(ctx, e.ID, &client.WaitOptions{TimeoutMs: int(timeout.Milliseconds())})
	if errors.Is(err, client.ErrTimeout) {
		return fmt.Errorf("%w (after %s; the execution goes on, GET it later)", err, timeout)
	}
	if err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	if res.Status != client.StatusCompleted {
		return fmt.Errorf("execution %s %s: %s", res.ID, res.Status, res.Error)
	}
	// The stream's terminal event carries the output; the record adds the credits billed.
	rec, err := c.GetExecution(ctx, e.ID)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	fmt.Printf("%s %s output=%s totalUsage=%g\n", res.ID, res.Status, res.Output, rec.TotalUsage)
	return nil
}

func clientFromEnv() (*client.Client, error) {
	base := os.Getenv("SWITCHYARD_URL")
	if base == "" {
		base = "http://localhost:8080"
	}
	key, secret := os.Getenv("SWITCHYARD_API_KEY"), os.Getenv("SWITCHYARD_API_SECRET")
	if key == "" || secret == "" {
		return nil, errors.New("set SWITCHYARD_API_KEY and SWITCHYARD_API_SECRET (printed by scripts/run.sh on the first start, or by switchyard admin apikey create)")
	}
	c, err := client.New(base, key, secret)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}
