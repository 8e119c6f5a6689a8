"""``medflows pool build rwe``: generate the synthetic EHR, load it, publish the RWE studies."""
