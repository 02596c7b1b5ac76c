package schema

// Quantity is a resource amount as written in a manifest: "100m", "0.5",
// "200Mi", "1Gi", "1e3". Parse it with ParseQuantity, or read it with
// Quantity.Value and Quantity.MilliValue (quantity_parse.go).
type Quantity string
