//! Deserialisers of the integer fields of the case format, so that a wrong value names its key
//! even inside `[[sources]]`: sources are tagged enums, whose parse errors point at the table
//! header only (`invalid value: integer -1, expected usize` at `[[sources]]` said nothing about
//! which key). Now: "`count` must be a whole number >= 0, got -1".

use serde::de::{Deserializer, Error, Visitor};
use std::fmt;
use std::marker::PhantomData;

struct WholeNumber<T> {
    key: &'static str,
    _t: PhantomData<T>,
}

impl<T: TryFrom<u64>> Visitor<'_> for WholeNumber<T>
where
    T: num_max::Max,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a whole number for `{}`", self.key)
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| {
            E::custom(format!(
                "`{}` = {v} is too large (at most {})",
                self.key,
                T::MAX_U64
            ))
        })
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(E::custom(format!(
                "`{}` must be a whole number >= 0, got {v}",
                self.key
            ))),
        }
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<T, E> {
        Err(E::custom(format!(
            "`{}` must be a whole number, got {}",
            self.key,
            super::ranges::value(v)
        )))
    }
}

/// Largest value of the integer types used, for messages.
mod num_max {
    pub trait Max {
        const MAX_U64: u64;
    }
    impl Max for u32 {
        const MAX_U64: u64 = u32::MAX as u64;
    }
    impl Max for u64 {
        const MAX_U64: u64 = u64::MAX;
    }
    impl Max for usize {
        const MAX_U64: u64 = usize::MAX as u64;
    }
}

fn whole<'de, D: Deserializer<'de>, T: TryFrom<u64> + num_max::Max>(
    d: D,
    key: &'static str,
) -> Result<T, D::Error> {
    d.deserialize_any(WholeNumber {
        key,
        _t: PhantomData,
    })
}

pub(super) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    whole(d, "count")
}

pub(super) fn optional_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    whole(d, "count").map(Some)
}

pub(super) fn seed<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    whole(d, "seed")
}

pub(super) fn reorder_every<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    whole(d, "reorder_every")
}

/// `version`: a whole number this build reads.
pub(super) fn version<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v: u32 = d.deserialize_any(WholeNumber {
        key: "version",
        _t: PhantomData,
    })?;
    if v != super::CASE_VERSION {
        return Err(D::Error::custom(format!(
            "`version` = {v}: this solver reads case format version {} (newer cases need a newer solver)",
            super::CASE_VERSION
        )));
    }
    Ok(v)
}
