"""FluidPD live router: an OpenAI-compatible P/D proxy in front of vLLM engines."""
