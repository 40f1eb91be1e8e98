"""Frontends: one per source language, each turning a file into the kernel model (`base.Frontend`);
`registry.frontend_for` picks the one a file is written for."""
