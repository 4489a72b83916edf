"""pmubuild.hw: invoke test-hw on fake hosts and fake hardware."""
