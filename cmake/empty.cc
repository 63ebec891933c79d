// placeholder for an area with no sources yet
