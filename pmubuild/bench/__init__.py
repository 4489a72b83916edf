"""`invoke bench`: the cost of a read on every path (bench) and the frequency comparison
with the seed's mhz tool (benchmhz)."""
