package billing

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func fold(events ...domain.Event) State {
	var s State
	for _, e := range events {
		s = s.Evolve(e)
	}
	return s
}

func TestBalances(t *testing.T) {
	s := fold(
		CreditsPurchased{Amount: FromWhole(10)},
		PlanRenewed{Included: FromWhole(5)},
		CreditsCharged{Amount: FromWhole(7), FromUsage: FromWhole(5), FromCredit: FromWhole(2)},
		PlanRenewed{Included: FromWhole(3)},
	)
	if s.Credit != FromWhole(8) || s.Usage != FromWhole(3) || s.Total() != FromWhole(11) {
		t.Fatalf("credit %s usage %s total %s, want 8 3 11", s.Credit, s.Usage, s.Total())
	}
	if s.Entries != 4 {
		t.Fatalf("entries %d, want 4", s.Entries)
	}
}

func TestDecideCharge(t *testing.T) {
	cases := []struct {
		name               string
		state              State
		amount             Credits
		wantErr            error
		wantUsage, wantPay Credits
	}{
		{"usage first", State{Credit: 10_000, Usage: 4_000}, 3_000, nil, 3_000, 0},
		{"spills to credit", State{Credit: 10_000, Usage: 4_000}, 6_500, nil, 4_000, 2_500},
		{"credit only", State{Credit: 10_000}, 2_000, nil, 0, 2_000},
		{"exact total", State{Credit: 1_000, Usage: 1_000}, 2_000, nil, 1_000, 1_000},
		{"insufficient", State{Credit: 1_000, Usage: 500}, 1_501, domain.ErrInsufficientCredits, 0, 0},
		{"free call", State{}, 0, nil, 0, 0},
		{"negative", State{Credit: 5}, -1, domain.ErrInvalid, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs, err := DecideCharge(c.state, "ws", "execution-1", c.amount, now)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil || len(evs) != 1 {
				t.Fatalf("events %v err %v", evs, err)
			}
			ch := evs[0].(CreditsCharged)
			if ch.FromUsage != c.wantUsage || ch.FromCredit != c.wantPay || ch.Amount != c.amount {
				t.Fatalf("split %s/%s of %s, want %s/%s", ch.FromUsage, ch.FromCredit, ch.Amount, c.wantUsage, c.wantPay)
			}
			if ch.IdempotencyKey() != "charge:ws:execution-1" {
				t.Fatalf("idempotency key %q", ch.IdempotencyKey())
			}
		})
	}
}

func TestDecideTopUpAndRenew(t *testing.T) {
	if _, err := DecideTopUp(State{}, "ws", 0, "", now); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("zero top-up: %v", err)
	}
	if _, err := DecideTopUp(State{}, "ws", MaxAmount+1, "", now); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("huge top-up: %v", err)
	}
	evs, err := DecideTopUp(State{}, "ws", 2_500, " inv-1 ", now)
	if err != nil || evs[0].(CreditsPurchased).Reference != "inv-1" {
		t.Fatalf("top-up %v %v", evs, err)
	}
	if k := evs[0].(CreditsPurchased).IdempotencyKey(); k != "topup:ws:inv-1" {
		t.Fatalf("key %q", k)
	}
	evs, err = DecideRenew(State{Usage: 1_200}, "ws", 5_000, now)
	if err != nil || evs[0].(PlanRenewed).Lapsed != 1_200 {
		t.Fatalf("renew %v %v", evs, err)
	}
	if _, err := DecideRenew(State{}, "ws", -1, now); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("negative renew: %v", err)
	}
}

func TestCreditsJSON(t *testing.T) {
	for in, want := range map[string]Credits{"1": 1000, "0.5": 500, "12.345": 12345, "1e2": 100000, "-2.5": -2500} {
		var c Credits
		if err := json.Unmarshal([]byte(in), &c); err != nil || c != want {
			t.Fatalf("unmarshal %s = %d, %v; want %d", in, c, err, want)
		}
	}
	for _, bad := range []string{"0.0001", `"x"`, "1e300"} {
		var c Credits
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Fatalf("unmarshal %s accepted", bad)
		}
	}
	for c, want := range map[Credits]string{1000: "1", 1500: "1.5", 12345: "12.345", -250: "-0.25", 0: "0"} {
		b, _ := json.Marshal(c)
		if string(b) != want {
			t.Fatalf("marshal %d = %s, want %s", c, b, want)
		}
	}
}
