//! `--expect-iops`: a provider's IOPS formula such as
//! `min(1200+30*GiB,20000)`, in numbers, `GiB` (the volume's size), `+ - *
//! /`, `min`, `max` and parentheses, parsed once and evaluated at the
//! measured volume's size.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Number(f64),
    Gib,
    Neg(Box<Expr>),
    Binary(char, Box<Expr>, Box<Expr>),
    Call(Extremum, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Extremum {
    Min,
    Max,
}

/// A parsed formula and the text it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    text: String,
    expr: Expr,
}

impl fmt::Display for Formula {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Formula {
    pub fn parse(text: &str) -> Result<Formula, String> {
        let mut p = Parser {
            text,
            chars: text
                .char_indices()
                .filter(|(_, c)| !c.is_whitespace())
                .collect(),
            at: 0,
        };
        let expr = p.sum()?;
        if p.at < p.chars.len() {
            return Err(p.error("an operator or the end"));
        }
        Ok(Formula {
            text: text.to_string(),
            expr,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The expected IOPS for a volume of `gib` GiB.
    pub fn eval(&self, gib: f64) -> f64 {
        eval(&self.expr, gib)
    }
}

fn eval(e: &Expr, gib: f64) -> f64 {
    match e {
        Expr::Number(n) => *n,
        Expr::Gib => gib,
        Expr::Neg(a) => -eval(a, gib),
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval(a, gib), eval(b, gib));
            match op {
                '+' => a + b,
                '-' => a - b,
                '*' => a * b,
                _ => a / b,
            }
        }
        Expr::Call(Extremum::Min, a, b) => eval(a, gib).min(eval(b, gib)),
        Expr::Call(Extremum::Max, a, b) => eval(a, gib).max(eval(b, gib)),
    }
}

/// Recursive descent over the formula's characters, blanks left out.
struct Parser<'a> {
    text: &'a str,
    chars: Vec<(usize, char)>,
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).map(|&(_, c)| c)
    }

    /// "expected X at character N" (counting from 1), or "at the end".
    fn error(&self, expected: &str) -> String {
        let place = match self.chars.get(self.at) {
            Some(&(i, c)) => format!(
                "at character {} ('{c}')",
                self.text[..i].chars().count() + 1
            ),
            None => "at the end".to_string(),
        };
        format!(
            "--expect-iops '{}': expected {expected} {place}; a formula takes numbers, GiB, + - * /, min(a,b), max(a,b) and parentheses",
            self.text
        )
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(c);
        self.at += usize::from(found);
        found
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut left = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.at += 1;
            left = Expr::Binary(op, Box::new(left), Box::new(self.product()?));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut left = self.factor()?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            self.at += 1;
            left = Expr::Binary(op, Box::new(left), Box::new(self.factor()?));
        }
        Ok(left)
    }

    fn factor(&mut self) -> Result<Expr, String> {
        if self.eat('-') {
            return Ok(Expr::Neg(Box::new(self.factor()?)));
        }
        if self.eat('(') {
            let inner = self.sum()?;
            return self.close(inner);
        }
        let start = self.at;
        match self.peek() {
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let number = self.take(|c| c.is_ascii_digit() || c == '.');
                number.parse().map(Expr::Number).map_err(|_| {
                    self.at = start;
                    self.error("a number")
                })
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let word = self.take(|c| c.is_ascii_alphabetic());
                let extremum = match word.as_str() {
                    "GiB" => return Ok(Expr::Gib),
                    "min" => Extremum::Min,
                    "max" => Extremum::Max,
                    _ => {
                        self.at = start;
                        return Err(self.error("a number, GiB, min or max"));
                    }
                };
                if !self.eat('(') {
                    return Err(self.error("'('"));
                }
                let a = self.sum()?;
                if !self.eat(',') {
                    return Err(self.error("','"));
                }
                let b = self.sum()?;
                self.close(Expr::Call(extremum, Box::new(a), Box::new(b)))
            }
            _ => Err(self.error("a number, GiB, min, max or '('")),
        }
    }

    fn close(&mut self, inner: Expr) -> Result<Expr, String> {
        if self.eat(')') {
            Ok(inner)
        } else {
            Err(self.error("')'"))
        }
    }

    fn take(&mut self, keep: impl Fn(char) -> bool) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek().filter(|&c| keep(c)) {
            word.push(c);
            self.at += 1;
        }
        word
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_providers_formula_evaluates_at_the_volumes_size() {
        let f = Formula::parse("min(1200+30*GiB,20000)").unwrap();
        assert_eq!(f.eval(356.0), 11_880.0);
        assert_eq!(f.eval(1000.0), 20_000.0);
        let g = Formula::parse(" max( 100 , (GiB - 10) / 2 ) * -1 + 3").unwrap();
        assert_eq!(g.eval(410.0), -197.0);
        assert_eq!(Formula::parse("1.5*GiB").unwrap().eval(2.0), 3.0);
    }

    #[test]
    fn a_bad_formula_says_where() {
        let err = |t: &str| Formula::parse(t).unwrap_err();
        assert!(
            err("min(1200+30*GiB,20000").contains("expected ')' at the end"),
            "{}",
            err("min(1200+30*GiB,20000")
        );
        assert!(
            err("1200+30*TiB").contains("expected a number, GiB, min or max at character 9 ('T')")
        );
        assert!(err("min(1,2) 3").contains("expected an operator or the end at character 10 ('3')"));
        assert!(err("1..2").contains("expected a number at character 1"));
        assert!(err("").contains("at the end"));
    }
}
