//! The texts of create-request errors, as the original service returns them.
//!
//! The original is DRF with `LANGUAGE_CODE='ru'`: Django looks a message up
//! in DRF's `ru_RU` catalogue, then in `ru`, and falls back to the English
//! source where neither translates it. That is why a few texts below are
//! English ("Not a valid string.", "No data provided", the surrogate one):
//! they are untranslated in DRF 3.16 and clients of the original see them so.
//! Every text was taken from a live DRF 3.16.1 / Django 5.2 run.
//!
//! Not for: texts of other endpoints or of the SSRF guard (those are in
//! `src/` and [`crate::ssrf`]).

/// DRF `Field.error_messages['required']`.
pub const REQUIRED: &str = "Обязательное поле.";
/// DRF `CharField.error_messages['blank']`.
pub const BLANK: &str = "Это поле не может быть пустым.";
/// DRF `Field.error_messages['null']` (the same Russian text as blank).
pub const NULL: &str = "Это поле не может быть пустым.";
/// DRF `CharField.error_messages['invalid']`: a bool, list or object given
/// to a string field. Untranslated in DRF's Russian catalogues.
pub const NOT_A_STRING: &str = "Not a valid string.";
/// django-phonenumber-field's "Enter a valid phone number.", in Russian.
pub const INVALID_PHONE: &str = "Введите корректный номер телефона.";
/// DRF `URLField.error_messages['invalid']`.
pub const INVALID_URL: &str = "Введите правильный URL.";
/// DRF `IntegerField.error_messages['invalid']`.
pub const INVALID_INTEGER: &str = "Введите правильное число.";
/// DRF `IntegerField.error_messages['max_string_length']`.
pub const INTEGER_STRING_TOO_LONG: &str = "Слишком длинное значение.";
/// Django `ProhibitNullCharactersValidator`, in Django's Russian catalogue.
pub const NULL_CHARACTERS: &str = "Данные содержат запрещённый символ: ноль-байт";
/// A body that is JSON `null`: DRF's serializer answers this untranslated
/// text under `non_field_errors`.
pub const NO_DATA: &str = "No data provided";
/// Prefix of DRF's `{"detail": ...}` for a body that is not JSON.
pub const JSON_PARSE_ERROR_PREFIX: &str = "JSON parse error - ";
/// The key DRF uses for errors that belong to no single field.
pub const NON_FIELD_ERRORS: &str = "non_field_errors";

/// DRF `CharField.error_messages['max_length']`.
pub fn max_length(chars: usize) -> String {
    format!("Убедитесь, что это значение содержит не более {chars} символов.")
}

/// DRF `IntegerField.error_messages['min_value']`.
pub fn min_value(min: i64) -> String {
    format!("Убедитесь, что это значение больше либо равно {min}.")
}

/// DRF `IntegerField.error_messages['max_value']`.
pub fn max_value(max: i64) -> String {
    format!("Убедитесь, что это значение меньше либо равно {max}.")
}

/// DRF `ProhibitSurrogateCharactersValidator` (untranslated in DRF).
pub fn surrogate_characters(code_unit: u16) -> String {
    format!("Surrogate characters are not allowed: U+{code_unit:X}.")
}

/// DRF `Serializer.error_messages['invalid']` for a body that is JSON but
/// not an object; `python_type` is Python's type name (`list`, `str`, ...).
pub fn not_a_dictionary(python_type: &str) -> String {
    format!("Недопустимые данные. Ожидался dictionary, но был получен {python_type}.")
}
