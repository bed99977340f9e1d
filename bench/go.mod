module github.com/idforge/idforge/bench

go 1.26.0

replace github.com/idforge/idforge => ../

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/idforge/idforge v0.0.0-00010101000000-000000000000
	github.com/sony/sonyflake v1.2.0
)
