//! The filters' values of a resource's records as the extract gathers them: each distinct value
//! held once, as a number, and each record's values as those numbers. At 1M records, the values
//! held as strings a record (a vector of vectors of strings each) were the fresh build's peak.

use crate::build::index::Summary;
use std::collections::HashMap;

/// Each declared field's values, and each record's, gathered in list order.
pub(super) struct Values {
    fields: Vec<Field>,
    /// Each record's values, field by field, as their numbers in their field.
    numbers: Vec<u32>,
    /// Where each record's values for each field end in `numbers` (a record, then a field).
    ends: Vec<u32>,
    /// For each field: the most values one record gives it, and that record's id.
    most: Vec<(usize, i64)>,
}

/// One field's distinct values, numbered as first met, and the list positions taking each
/// (a position twice when its record gives the value twice).
#[derive(Default)]
struct Field {
    numbered: HashMap<String, u32>,
    texts: Vec<String>,
    positions: Vec<Vec<u32>>,
}

impl Values {
    /// Room for `records` records' values of `fields` fields.
    pub(super) fn new(fields: usize, records: usize) -> Values {
        Values {
            fields: (0..fields).map(|_| Field::default()).collect(),
            numbers: Vec::with_capacity(records * fields),
            ends: Vec::with_capacity(records * fields),
            most: vec![(0, 0); fields],
        }
    }

    /// Adds the values of the record at list position `position` (its id `id`), field by field;
    /// records come in list order.
    pub(super) fn add(&mut self, position: usize, id: i64, values: Vec<Vec<String>>) {
        for ((field, most), values) in self.fields.iter_mut().zip(&mut self.most).zip(values) {
            if values.len() > most.0 {
                *most = (values.len(), id);
            }
            for value in values {
                let next = field.texts.len() as u32;
                let number = match field.numbered.get(&value) {
                    Some(&number) => number,
                    None => {
                        field.texts.push(value.clone());
                        field.positions.push(Vec::new());
                        field.numbered.insert(value, next);
                        next
                    }
                };
                field.positions[number as usize].push(position as u32);
                self.numbers.push(number);
            }
            self.ends.push(self.numbers.len() as u32);
        }
    }

    /// The values of the record at list position `position`, field by field.
    pub(super) fn of(&self, position: usize) -> Vec<Vec<String>> {
        let width = self.fields.len();
        (0..width)
            .map(|f| {
                let at = position * width + f;
                let start = if at == 0 { 0 } else { self.ends[at - 1] as usize };
                let numbers = &self.numbers[start..self.ends[at] as usize];
                numbers.iter().map(|&n| self.fields[f].texts[n as usize].clone()).collect()
            })
            .collect()
    }

    /// Each field's values, ascending, with the list positions taking each; and the most values
    /// one record gives each field. The positions are taken: [`Values::of`] still answers.
    pub(super) fn summary(&mut self) -> Summary {
        let fields = self
            .fields
            .iter_mut()
            .map(|field| {
                field.numbered = HashMap::new();
                let mut order: Vec<usize> = (0..field.texts.len()).collect();
                order.sort_unstable_by(|&a, &b| field.texts[a].cmp(&field.texts[b]));
                order.into_iter().map(|n| (field.texts[n].clone(), std::mem::take(&mut field.positions[n]))).collect()
            })
            .collect();
        Summary { fields, most: self.most.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&[&str]]) -> Vec<Vec<String>> {
        values.iter().map(|field| field.iter().map(|v| v.to_string()).collect()).collect()
    }

    #[test]
    fn each_record_gives_back_its_values_and_each_value_its_positions() {
        let rows = [strings(&[&["b"], &["x", "x"]]), strings(&[&[], &["y"]]), strings(&[&["a", "b"], &[]])];
        let mut values = Values::new(2, rows.len());
        for (position, row) in rows.iter().enumerate() {
            values.add(position, 10 + position as i64, row.clone());
        }
        let summary = values.summary();
        let owned = |pairs: &[(&str, &[u32])]| -> Vec<(String, Vec<u32>)> {
            pairs.iter().map(|(v, p)| (v.to_string(), p.to_vec())).collect()
        };
        assert_eq!(summary.fields[0], owned(&[("a", &[2]), ("b", &[0, 2])]));
        // a value a record gives twice counts its position twice, as it did before numbering
        assert_eq!(summary.fields[1], owned(&[("x", &[0, 0]), ("y", &[1])]));
        assert_eq!(summary.most, vec![(2, 12), (2, 10)]);
        for (position, row) in rows.iter().enumerate() {
            assert_eq!(&values.of(position), row);
        }
    }
}
