package schema

// Quantity is a resource amount as written in a manifest: "100m", "0.5",
// "200Mi", "1Gi", "1e3". Parse it with ParseQuantity (quantity_parse.go).
type Quantity string
