"""perturbations."""
