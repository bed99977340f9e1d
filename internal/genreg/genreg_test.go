package genreg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/genreg"
)

// counter is a Generator that counts up and records whether it was closed.
type counter struct {
	next   atomic.Int64
	closed atomic.Int32
}

func (c *counter) NextID(context.Context) (int64, error) { return c.next.Add(1), nil }

// closer adds io.Closer to counter.
type closer struct{ counter }

func (c *closer) Close() error {
	c.closed.Add(1)
	return nil
}

func TestRegistryRegisterAndLookup(t *testing.T) {
	ctx := context.Background()
	r := genreg.New()
	def, order := &counter{}, &counter{}
	if err := r.Register("snowflake", "", def); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("snowflake", "order", order); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]*counter{"": def, "order": order} {
		g, err := r.Generator(ctx, "snowflake", name)
		if err != nil || g != want {
			t.Errorf("Generator(snowflake, %q) = %v, %v; want the registered one", name, g, err)
		}
	}
	if id, err := r.NextID(ctx, "snowflake", "order"); err != nil || id != 1 {
		t.Errorf("NextID = %d, %v; want 1", id, err)
	}
	if id, _ := r.NextID(ctx, "snowflake", "order"); id != 2 {
		t.Errorf("second NextID = %d, want 2 from the same generator", id)
	}
	if k := r.Kinds(); len(k) != 1 || k[0] != "snowflake" {
		t.Errorf("Kinds = %v, want [snowflake]", k)
	}
}

func TestRegistryDuplicate(t *testing.T) {
	r := genreg.New()
	if err := r.Register("snowflake", "order", &counter{}); err != nil {
		t.Fatal(err)
	}
	err := r.Register("snowflake", "order", &counter{})
	if !errors.Is(err, genreg.ErrDuplicateGenerator) || !strings.Contains(err.Error(), `"order"`) {
		t.Errorf("second Register: %v; want ErrDuplicateGenerator naming \"order\"", err)
	}
	// Same name, other kind: no clash.
	if err := r.Register("chain", "order", &counter{}); err != nil {
		t.Errorf("Register(chain, order): %v", err)
	}
	f := func(context.Context, string) (engine.Generator, error) { return &counter{}, nil }
	if err := r.RegisterFactory("segment", f); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterFactory("segment", f); !errors.Is(err, genreg.ErrDuplicateGenerator) {
		t.Errorf("second RegisterFactory: %v; want ErrDuplicateGenerator", err)
	}
}

func TestRegistryBadArguments(t *testing.T) {
	r := genreg.New()
	for name, err := range map[string]error{
		"Register no kind":        r.Register("", "x", &counter{}),
		"Register nil":            r.Register("snowflake", "x", nil),
		"RegisterFactory no kind": r.RegisterFactory("", func(context.Context, string) (engine.Generator, error) { return nil, nil }),
		"RegisterFactory nil":     r.RegisterFactory("chain", nil),
	} {
		if !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%s: %v; want ErrInvalidConfig", name, err)
		}
	}
}

func TestRegistryUnknownKind(t *testing.T) {
	ctx := context.Background()
	r := genreg.New()
	_ = r.Register("snowflake", "", &counter{})
	_ = r.RegisterFactory("chain", func(context.Context, string) (engine.Generator, error) { return &counter{}, nil })

	_, err := r.Generator(ctx, "segmnet", "order")
	if !errors.Is(err, engine.ErrUnknownGenerator) {
		t.Fatalf("unknown kind: %v; want ErrUnknownGenerator", err)
	}
	for _, want := range []string{`"segmnet"`, `"order"`, "chain", "snowflake"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := r.NextID(ctx, "segmnet", ""); !errors.Is(err, engine.ErrUnknownGenerator) {
		t.Errorf("NextID on unknown kind: %v", err)
	}
	// A known kind without a factory does not make up names.
	if _, err := r.Generator(ctx, "snowflake", "order"); !errors.Is(err, engine.ErrUnknownGenerator) {
		t.Errorf("unregistered name of a kind without factory: %v; want ErrUnknownGenerator", err)
	}
	if got := r.Kinds(); strings.Join(got, ",") != "chain,snowflake" {
		t.Errorf("Kinds() = %v, want [chain snowflake]", got)
	}
}

func TestRegistryFactoryPerName(t *testing.T) {
	ctx := context.Background()
	r := genreg.New()
	var names []string
	err := r.RegisterFactory("chain", func(_ context.Context, name string) (engine.Generator, error) {
		names = append(names, name)
		return &counter{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a1, _ := r.Generator(ctx, "chain", "a")
	a2, _ := r.Generator(ctx, "chain", "a")
	b, _ := r.Generator(ctx, "chain", "b")
	if a1 == nil || a1 != a2 || a1 == b {
		t.Errorf("a1=%p a2=%p b=%p: want one generator per name, cached", a1, a2, b)
	}
	if strings.Join(names, ",") != "a,b" {
		t.Errorf("factory called for %q, want [a b]", names)
	}
}

func TestRegistryFactoryError(t *testing.T) {
	ctx := context.Background()
	r := genreg.New()
	calls := 0
	_ = r.RegisterFactory("chain", func(context.Context, string) (engine.Generator, error) {
		calls++
		if calls == 1 {
			return nil, engine.ErrStoreUnavailable
		}
		return &counter{}, nil
	})
	_, err := r.Generator(ctx, "chain", "order")
	if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), `"order"`) {
		t.Fatalf("failing factory: %v; want its error wrapped, naming \"order\"", err)
	}
	// A failure is not cached: the next lookup tries again.
	if g, err := r.Generator(ctx, "chain", "order"); err != nil || g == nil {
		t.Fatalf("retry after a failed factory: %v, %v", g, err)
	}
}

// Many goroutines asking for the same new name at once must all get the same
// generator, and the factory (which may open store connections or start a
// prefetch worker) must run once per name.
func TestRegistryFactoryOncePerNameConcurrent(t *testing.T) {
	ctx := context.Background()
	r := genreg.New()
	var calls sync.Map // name -> *atomic.Int32
	_ = r.RegisterFactory("chain", func(_ context.Context, name string) (engine.Generator, error) {
		n, _ := calls.LoadOrStore(name, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		time.Sleep(5 * time.Millisecond) // a store round trip: lets the other callers arrive meanwhile
		return &closer{}, nil
	})
	names := []string{"a", "b", "c", "d"}
	const perName = 64
	got := make([]engine.Generator, len(names)*perName)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			<-start
			g, err := r.Generator(ctx, "chain", names[i%len(names)])
			if err != nil {
				t.Error(err)
			}
			got[i] = g
		})
	}
	close(start)
	wg.Wait()
	for i, g := range got {
		if first := got[i%len(names)]; g != first {
			t.Fatalf("name %q: two different generators handed out", names[i%len(names)])
		}
	}
	for _, name := range names {
		n, _ := calls.Load(name)
		if c := n.(*atomic.Int32).Load(); c != 1 {
			t.Errorf("factory called %d times for %q, want once", c, name)
		}
	}
}

func TestRegistryClose(t *testing.T) {
	ctx := context.Background()
	r := genreg.New()
	registered, plain := &closer{}, &counter{}
	_ = r.Register("segment", "order", registered)
	_ = r.Register("snowflake", "", plain)
	var made []*closer
	_ = r.RegisterFactory("chain", func(context.Context, string) (engine.Generator, error) {
		c := &closer{}
		made = append(made, c)
		return c, nil
	})
	if _, err := r.Generator(ctx, "chain", "user"); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if registered.closed.Load() != 1 || len(made) != 1 || made[0].closed.Load() != 1 {
		t.Errorf("Close: registered closer closed %d times, factory-made %d; want 1 each",
			registered.closed.Load(), made[0].closed.Load())
	}
	for _, kn := range [][2]string{{"segment", "order"}, {"snowflake", ""}, {"chain", "user"}, {"chain", "new"}, {"nope", ""}} {
		if _, err := r.Generator(ctx, kn[0], kn[1]); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("Generator(%q, %q) after Close: %v; want ErrClosed", kn[0], kn[1], err)
		}
		if _, err := r.NextID(ctx, kn[0], kn[1]); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("NextID(%q, %q) after Close: %v; want ErrClosed", kn[0], kn[1], err)
		}
	}
	if len(made) != 1 {
		t.Errorf("factory ran %d times; a closed registry must not create generators", len(made))
	}
	if err := r.Register("x", "", &counter{}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Register after Close: %v; want ErrClosed", err)
	}
	if err := r.Close(); err != nil || registered.closed.Load() != 1 {
		t.Errorf("second Close: %v, closed %d times; want nil and no second close", err, registered.closed.Load())
	}
}

type failingCloser struct{ counter }

func (*failingCloser) Close() error { return engine.ErrStoreUnavailable }

func TestRegistryCloseJoinsErrors(t *testing.T) {
	r := genreg.New()
	ok := &closer{}
	_ = r.Register("a", "", &failingCloser{})
	_ = r.Register("b", "", ok)
	if err := r.Close(); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Errorf("Close: %v; want the generator's error", err)
	}
	if ok.closed.Load() != 1 {
		t.Error("a failing Close stopped the others from closing")
	}
}
