"""The two IRs (graph IR, kernel IR) and the passes between them; imports neither codegen nor runtime."""
