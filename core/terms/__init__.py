"""The cloth's potential term by term, each a class behind one interface (base.Term), summed by
potential.Potential: springs, hinge bending, gravity, collider contact, friction, self-contact."""
