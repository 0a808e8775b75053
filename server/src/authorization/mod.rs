//! Authorization: whether a user may do a verb on a resource or a non-resource path.
