//! The generated Uniffle wire types (`proto/rss.proto`, package `rss.common`).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("rss.common");
