//! The built tree as an artefact: where each document lives ([`layout`]), what the tree holds
//! ([`manifest`]), its folder read and written without following a link ([`dir`]), and the
//! files its manifest lists, read bounded and checked against their hashes ([`listing`]).
//! The build writes the tree through this module; serve and publish read it through it.

pub mod dir;
pub mod layout;
pub mod listing;
pub mod manifest;
