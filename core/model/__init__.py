"""The cloth as simulated: meshes, fabrics, the potential's terms, the scene."""
