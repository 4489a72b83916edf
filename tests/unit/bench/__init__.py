"""pmubuild.bench: invoke bench's statistics and frequency comparison."""
