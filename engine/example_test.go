package engine_test

import (
	"encoding/json"
	"fmt"

	"github.com/idforge/idforge/engine"
)

// An ID travels through JSON as a string, so a JavaScript client keeps every
// digit, and reads numbers and strings alike.
func ExampleID_json() {
	type Order struct {
		ID   engine.ID `json:"id"`
		Item string    `json:"item"`
	}
	b, _ := json.Marshal(Order{ID: 1<<53 + 1, Item: "book"})
	fmt.Println(string(b))

	var o Order
	err := json.Unmarshal([]byte(`{"id":9007199254740993,"item":"pen"}`), &o)
	fmt.Println(int64(o.ID), o.Item, err)

	err = json.Unmarshal([]byte(`{"id":"12ab"}`), &o)
	fmt.Println(err)
	// Output:
	// {"id":"9007199254740993","item":"book"}
	// 9007199254740993 pen <nil>
	// idforge: invalid id: "12ab": not a decimal number
}
