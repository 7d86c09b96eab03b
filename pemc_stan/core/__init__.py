"""What the methods share with sampling and the mode search: a transform's result, the
base coordinates and densities, the templates' helpers, summing out a change point, the
options every method has, and the mode search's rules and record."""
