"""Hidden checks, one module per lab; each public function is one graded test named as in course.yml."""
